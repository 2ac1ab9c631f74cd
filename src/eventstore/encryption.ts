import type { EncryptionConfig } from "../config.js";
import type { ContentPolicy } from "./encrypting.js";
import type { EventStore } from "./types.js";
import type { MasterKeys } from "../crypto/master-keys.js";

/** The key vault, open, and the wrapper that encrypts a store with it. */
export interface Encryption {
  /** The store with its events' content sealed on append and opened on read (src/eventstore/encrypting.ts). */
  wrap(store: EventStore): EventStore;
  /** The master keys it opened the vault with (the read models' file key derives from the current one). */
  masterKeys: MasterKeys;
  /** Closes the key vault: after the stores it wrapped, which may still seal or open on their way out. */
  close(): void;
}

/**
 * Opens the key vault with the configured master keys, for the server and the offline tools alike, so
 * that none of them folds sealed data as it lies in the log. Undefined when no master key is set; the
 * crypto code is loaded only when one is. A master key that unwraps none of the vault's keys throws a
 * one-line error naming the vault. The split of events into content and clear comes from the domain
 * (src/domain/content-fields.ts, a layer above this one), so the caller hands it in.
 */
export async function openEncryption(
  encryption: EncryptionConfig | undefined,
  policyFor: (jsonKeys: readonly string[]) => ContentPolicy | Promise<ContentPolicy>,
): Promise<Encryption | undefined> {
  if (!encryption) return undefined;
  const [{ parseMasterKeys }, { openSealer, WrongMasterKeyError }, { withEncryption }] = await Promise.all([
    import("../crypto/master-keys.js"),
    import("../crypto/sealer.js"),
    import("./encrypting.js"),
  ]);
  const masterKeys = parseMasterKeys(encryption.masterKeyEnv);
  if (!masterKeys) throw new Error("LANGGRAPH_AES_KEY is not set");
  const policy = await policyFor(encryption.jsonKeys);
  let sealer;
  try {
    sealer = openSealer({ vaultPath: encryption.vaultPath, masterKeys });
  } catch (error) {
    if (error instanceof WrongMasterKeyError && !error.message.includes("LANGGRAPH_AES_KEY")) {
      throw new Error(`LANGGRAPH_AES_KEY does not open the key vault at ${encryption.vaultPath}: ${error.message}`);
    }
    throw error;
  }
  return { wrap: (store) => withEncryption(store, sealer, policy), masterKeys, close: () => sealer.close() };
}
