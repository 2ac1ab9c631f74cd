/** The sealer's errors, apart so that the vault and the sealer both throw them without importing each other. */

/** The envelope's data key was destroyed (its stream purged): the value is gone for good. */
export class KeyDestroyedError extends Error {
  override name = "KeyDestroyedError";
  constructor(readonly keyId: string) {
    super(`data key ${keyId} was destroyed: the value it sealed can no longer be read`);
  }
}

/** Not an envelope, an unknown data key, a data key no configured master key unwraps, or a ciphertext, tag or AAD that does not verify. */
export class UnreadableEnvelopeError extends Error {
  override name = "UnreadableEnvelopeError";
}

/** The vault holds data keys and none of the configured master keys unwraps any of them. */
export class WrongMasterKeyError extends Error {
  override name = "WrongMasterKeyError";
}
