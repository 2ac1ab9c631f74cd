import { randomBytes } from "node:crypto";
import { gcmDecrypt, gcmEncrypt, type Sealed } from "./gcm.js";

/**
 * The envelope a sealed value is stored as: `aes1:<key id>:<iv>:<tag>:<ciphertext>`, each part base64url, so it is
 * ASCII that a JSON string carries unescaped. The header has fixed widths, so recognising one reads ~62 characters
 * whatever the size of the value. The AAD is the stream name: an envelope copied to another stream does not open.
 */

const PREFIX = "aes1:";
/** Data key ids: 12 random bytes, 16 base64url characters. */
const KEY_ID_BYTES = 12;
const HEADER = /^aes1:[A-Za-z0-9_-]{16}:[A-Za-z0-9_-]{16}:[A-Za-z0-9_-]{22}:/;
const KEY_ID_AT = PREFIX.length;
const IV_AT = KEY_ID_AT + 17;
const TAG_AT = IV_AT + 17;
const CIPHERTEXT_AT = TAG_AT + 23;
const BASE64URL = /^[A-Za-z0-9_-]*$/;

export interface ParsedEnvelope extends Sealed {
  keyId: string;
}

/** Fresh data key ids; random, so processes sharing a vault need not coordinate to name keys. */
export function newKeyIds(count: number): string[] {
  const bytes = randomBytes(count * KEY_ID_BYTES);
  return Array.from({ length: count }, (_, i) => bytes.subarray(i * KEY_ID_BYTES, (i + 1) * KEY_ID_BYTES).toString("base64url"));
}

export function isEnvelope(value: unknown): value is string {
  return typeof value === "string" && value.startsWith(PREFIX) && HEADER.test(value);
}

/** The data key id an envelope names, or undefined when it is not one. */
export function envelopeKeyId(envelope: string): string | undefined {
  return isEnvelope(envelope) ? envelope.slice(KEY_ID_AT, KEY_ID_AT + 16) : undefined;
}

/** The IV part of an envelope known to be one (see isEnvelope): random per seal, so it names the sealed value. */
export function envelopeIv(envelope: string): string {
  return envelope.slice(IV_AT, IV_AT + 16);
}

export function sealEnvelope(key: Buffer, keyId: string, stream: string, plaintext: string): string {
  const { iv, tag, ciphertext } = gcmEncrypt(key, plaintext, stream);
  return `${PREFIX}${keyId}:${iv.toString("base64url")}:${tag.toString("base64url")}:${ciphertext.toString("base64url")}`;
}

/** Undefined when `envelope` is not in this format (Buffer.from would skip stray characters, so they are refused here). */
export function parseEnvelope(envelope: string): ParsedEnvelope | undefined {
  if (!isEnvelope(envelope)) return undefined;
  const body = envelope.slice(CIPHERTEXT_AT);
  if (!BASE64URL.test(body)) return undefined;
  return {
    keyId: envelope.slice(KEY_ID_AT, KEY_ID_AT + 16),
    iv: Buffer.from(envelope.slice(IV_AT, IV_AT + 16), "base64url"),
    tag: Buffer.from(envelope.slice(TAG_AT, TAG_AT + 22), "base64url"),
    ciphertext: Buffer.from(body, "base64url"),
  };
}

/** The plaintext, or undefined when it does not verify (tampered, wrong key, or sealed for another stream). */
export function openEnvelope(key: Buffer, parsed: ParsedEnvelope, stream: string): string | undefined {
  return gcmDecrypt(key, parsed, stream)?.toString("utf8");
}
