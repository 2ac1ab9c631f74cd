import { createHash } from "node:crypto";

/**
 * The master keys that wrap the data keys of the key vault, read from the environment. LANGGRAPH_AES_KEY is the
 * official server's variable; LANGGRAPH_AES_PREVIOUS_KEYS is ours, for rotation: keys that still unwrap older vault rows.
 */

/** id: first 16 hex chars of sha256(key); names the key in envelopes and vault rows without revealing it. */
export interface MasterKey {
  id: string;
  key: Buffer;
}

/** `current` wraps every new data key; `all` (current first) are tried, by id, to unwrap existing ones. */
export interface MasterKeys {
  current: MasterKey;
  all: readonly MasterKey[];
}

export class MasterKeyConfigError extends Error {
  override name = "MasterKeyConfigError";
}

const CURRENT = "LANGGRAPH_AES_KEY";
const PREVIOUS = "LANGGRAPH_AES_PREVIOUS_KEYS";
const AES_KEY_BYTES: readonly number[] = [16, 24, 32];

/**
 * LANGGRAPH_AES_KEY: a string whose UTF-8 bytes are 16, 24 or 32 long (AES-128/192/256), as the official server reads it.
 * LANGGRAPH_AES_PREVIOUS_KEYS (optional): a JSON array of such strings, older keys still readable.
 * Undefined when LANGGRAPH_AES_KEY is unset or empty; a MasterKeyConfigError (one line, never the key itself) when
 * a key has a bad length, the JSON is bad, or previous keys are given without a current one.
 */
export function parseMasterKeys(env: NodeJS.ProcessEnv): MasterKeys | undefined {
  const current = env[CURRENT];
  const previous = env[PREVIOUS];
  if (current === undefined || current === "") {
    // Previous keys alone would silently leave encryption off while the operator believes it on.
    if (previous !== undefined && previous.trim() !== "") {
      throw new MasterKeyConfigError(`${PREVIOUS} is set but ${CURRENT} is not: set ${CURRENT} to the key new data is encrypted with`);
    }
    return undefined;
  }
  const all = [masterKey(current, CURRENT)];
  for (const [i, secret] of previousSecrets(previous).entries()) {
    const key = masterKey(secret, `${PREVIOUS}[${i}]`);
    if (!all.some((k) => k.id === key.id)) all.push(key);
  }
  return { current: all[0], all };
}

/** The id a key is named by: short enough for every vault row, long enough that two keys never share it by chance. */
export function masterKeyId(key: Buffer): string {
  return createHash("sha256").update(key).digest("hex").slice(0, 16);
}

function masterKey(secret: string, name: string): MasterKey {
  const key = Buffer.from(secret, "utf8");
  if (!AES_KEY_BYTES.includes(key.length)) {
    throw new MasterKeyConfigError(
      `${name} must be 16, 24 or 32 bytes long in UTF-8 (AES-128, AES-192 or AES-256); it is ${key.length} byte${key.length === 1 ? "" : "s"}`,
    );
  }
  return { id: masterKeyId(key), key };
}

function previousSecrets(text: string | undefined): string[] {
  if (text === undefined || text.trim() === "") return [];
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    // Not the parser's message: it quotes the text, i.e. the keys.
    throw new MasterKeyConfigError(`${PREVIOUS} is not valid JSON: expected an array of key strings, e.g. ["<older key>"]`);
  }
  if (!Array.isArray(value) || !value.every((v): v is string => typeof v === "string")) {
    throw new MasterKeyConfigError(`${PREVIOUS} must be a JSON array of key strings, e.g. ["<older key>"]`);
  }
  return value;
}
