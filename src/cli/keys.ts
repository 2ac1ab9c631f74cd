/**
 * `agent-server keys rotate`: the last step of a master-key rotation. With LANGGRAPH_AES_KEY the
 * new key and LANGGRAPH_AES_PREVIOUS_KEYS the old ones, every data key of the vault still wrapped
 * by an old key is wrapped again by the new one, so the old keys can leave the environment. The
 * data keys themselves do not change: nothing of the log is rewritten.
 *
 * The steps: start every server with the new key and the old ones as previous keys (new data keys
 * are then wrapped by the new key), run this, then drop LANGGRAPH_AES_PREVIOUS_KEYS. Safe while a
 * server runs: the vault is SQLite in WAL mode, and a server keeps the data keys it has unwrapped.
 */
import { existsSync } from "node:fs";
import Database from "better-sqlite3";
import type { Config } from "../config.js";

/** What the command prints, one line each; throws an Error of one line when it cannot rotate. */
export async function rotateKeys(config: Pick<Config, "encryption">): Promise<string[]> {
  const encryption = config.encryption;
  if (!encryption?.masterKeyEnv.LANGGRAPH_AES_KEY) {
    throw new Error("keys rotate: LANGGRAPH_AES_KEY is not set: set it to the new master key, and LANGGRAPH_AES_PREVIOUS_KEYS to the old ones");
  }
  const { vaultPath } = encryption;
  // Opening a missing vault would create an empty one: a mistyped path must not look like a rotation done.
  if (!existsSync(vaultPath)) throw new Error(`keys rotate: no key vault at ${vaultPath} (LANGGRAPH_KEY_VAULT, or DATA_DIR/keys.sqlite)`);
  const [{ parseMasterKeys }, { openSealer }] = await Promise.all([import("../crypto/master-keys.js"), import("../crypto/sealer.js")]);
  const masterKeys = parseMasterKeys(encryption.masterKeyEnv)!;
  // A vault none of these keys opens is refused here, with the vault's own one-line reason.
  const sealer = openSealer({ vaultPath, masterKeys, poolSize: 1 });
  let rewrapped: number;
  try {
    rewrapped = sealer.rewrapAll();
  } finally {
    sealer.close();
  }
  const left = keysNotUnder(vaultPath, masterKeys.current.id);
  const lines = [`re-wrapped ${rewrapped} data key${rewrapped === 1 ? "" : "s"} of ${vaultPath} with LANGGRAPH_AES_KEY`];
  if (left === 0) {
    lines.push("every live data key is wrapped by LANGGRAPH_AES_KEY: the previous keys (LANGGRAPH_AES_PREVIOUS_KEYS) may now be dropped");
  } else {
    lines.push(
      `${left} data key${left === 1 ? " is" : "s are"} still wrapped by a master key not given in LANGGRAPH_AES_PREVIOUS_KEYS: keep the key that wraps them, add it there and run this again`,
    );
  }
  return lines;
}

/** Live data keys wrapped by another master key than `current`: those an old key is still needed for. */
function keysNotUnder(vaultPath: string, current: string): number {
  const db = new Database(vaultPath, { readonly: true, fileMustExist: true });
  try {
    return db.prepare("SELECT count(*) FROM data_keys WHERE wrapped IS NOT NULL AND destroyed = 0 AND master_key_id <> ?").pluck().get(current) as number;
  } finally {
    db.close();
  }
}
