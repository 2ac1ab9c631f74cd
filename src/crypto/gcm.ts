import { createCipheriv, createDecipheriv, randomFillSync, type CipherGCMTypes } from "node:crypto";

/** AES-GCM from Node's crypto, with the cipher picked by the key's length and a full-length tag always required. */

export const IV_BYTES = 12;
export const TAG_BYTES = 16;

export interface Sealed {
  iv: Buffer;
  tag: Buffer;
  ciphertext: Buffer;
}

function cipherFor(key: Buffer): CipherGCMTypes {
  switch (key.length) {
    case 16:
      return "aes-128-gcm";
    case 24:
      return "aes-192-gcm";
    case 32:
      return "aes-256-gcm";
    default:
      throw new RangeError(`an AES key is 16, 24 or 32 bytes long, not ${key.length}`);
  }
}

/**
 * Random IVs drawn from the CSPRNG a few thousand at a time: one call to it per IV costs as much as the encryption
 * of a small value. Each IV is copied out and its bytes in the batch are never handed out again.
 */
const ivBatch = Buffer.alloc(IV_BYTES * 4096);
let ivAt = ivBatch.length;

function nextIv(): Buffer {
  if (ivAt === ivBatch.length) {
    randomFillSync(ivBatch);
    ivAt = 0;
  }
  const iv = Buffer.from(ivBatch.subarray(ivAt, ivAt + IV_BYTES));
  ivAt += IV_BYTES;
  return iv;
}

/** Encrypts under a fresh random IV: keys here seal far fewer than the 2^32 messages random IVs allow. */
export function gcmEncrypt(key: Buffer, plaintext: Buffer | string, aad: Buffer | string): Sealed {
  const iv = nextIv();
  const cipher = createCipheriv(cipherFor(key), key, iv, { authTagLength: TAG_BYTES });
  cipher.setAAD(typeof aad === "string" ? Buffer.from(aad, "utf8") : aad);
  const head = typeof plaintext === "string" ? cipher.update(plaintext, "utf8") : cipher.update(plaintext);
  const ciphertext = joined(head, cipher.final());
  return { iv, tag: cipher.getAuthTag(), ciphertext };
}

/** The plaintext, or undefined when the key, IV, tag, ciphertext or AAD do not verify. */
export function gcmDecrypt(key: Buffer, sealed: Sealed, aad: Buffer | string): Buffer | undefined {
  // A short tag would be accepted by GCM and weaken it; a short IV is not ours.
  if (sealed.iv.length !== IV_BYTES || sealed.tag.length !== TAG_BYTES) return undefined;
  const decipher = createDecipheriv(cipherFor(key), key, sealed.iv, { authTagLength: TAG_BYTES });
  decipher.setAAD(typeof aad === "string" ? Buffer.from(aad, "utf8") : aad);
  decipher.setAuthTag(sealed.tag);
  try {
    const head = decipher.update(sealed.ciphertext);
    return joined(head, decipher.final());
  } catch {
    return undefined;
  }
}

/** GCM is a stream mode: `final()` returns nothing more, and the copy a concatenation makes is skipped. */
function joined(head: Buffer, tail: Buffer): Buffer {
  return tail.length === 0 ? head : Buffer.concat([head, tail]);
}
