import { closeSync, mkdirSync, openSync } from "node:fs";
import path from "node:path";
import { randomBytes } from "node:crypto";
import Database from "better-sqlite3";
import { gcmDecrypt, gcmEncrypt, IV_BYTES, TAG_BYTES } from "./gcm.js";
import { newKeyIds } from "./envelope.js";
import { WrongMasterKeyError } from "./errors.js";
import type { MasterKey, MasterKeys } from "./master-keys.js";

/**
 * The key vault: an SQLite file of data keys, each wrapped by a master key (AES-GCM, AAD = the key id). Several
 * processes may share one file (WAL mode, BEGIN IMMEDIATE, a busy timeout). A key belongs to the process whose refill
 * created it: nothing else ever hands it out, so no process needs to record, durably or at all, which key went
 * where; a crash merely wastes the keys it had not handed out yet.
 */

export interface DataKey {
  id: string;
  key: Buffer;
}

export type KeyLookup =
  | { state: "live"; key: Buffer }
  | { state: "destroyed" }
  | { state: "unknown" }
  /** Wrapped by a master key that is not configured, or one that does not verify. */
  | { state: "locked"; masterKeyId: string };

const DATA_KEY_BYTES = 32;
/** How long a statement waits for another process's write transaction before SQLITE_BUSY. */
const BUSY_TIMEOUT_MS = 5000;
const SCHEMA_VERSION = 2;

/** The schema of each version from the one before (index 0 creates version 1). */
const MIGRATIONS = [
  `
CREATE TABLE IF NOT EXISTS data_keys (
  key_id        TEXT PRIMARY KEY,
  master_key_id TEXT,                        -- the master key that wraps it; NULL once destroyed
  wrapped       BLOB,                        -- iv || tag || ciphertext of the data key; NULL once destroyed
  destroyed     INTEGER NOT NULL DEFAULT 0,  -- 1: a tombstone, so that its envelopes say "destroyed", not "unknown"
  block         TEXT                         -- the refill that created it: the keys reserved for the process that ran it
);
`,
  // The order of destructions, so that every process sharing the vault learns which keys to forget (see destroyedSince).
  `
ALTER TABLE data_keys ADD COLUMN destroyed_seq INTEGER; -- the destruction that made it a tombstone: 1, 2, ... (NULL: live, or destroyed before version 2)
CREATE INDEX IF NOT EXISTS data_keys_destroyed_seq ON data_keys (destroyed_seq) WHERE destroyed_seq IS NOT NULL;
`,
];

interface Row {
  key_id: string;
  master_key_id: string | null;
  wrapped: Buffer | null;
  destroyed: number;
}

export class KeyVault {
  private readonly db: Database.Database;
  private readonly byId: ReadonlyMap<string, MasterKey>;
  private readonly insert: Database.Statement<[string, string, Buffer, string]>;
  private readonly select: Database.Statement<[string], Row>;
  private readonly tombstone: Database.Statement<[number, string]>;
  private readonly lastSeq: Database.Statement<[], number | null>;
  private readonly destroyedAfter: Database.Statement<[number], string>;

  constructor(
    readonly path: string,
    private readonly masterKeys: MasterKeys,
  ) {
    this.byId = new Map(masterKeys.all.map((k) => [k.id, k]));
    this.db = openVaultDatabase(path);
    try {
      this.insert = this.db.prepare("INSERT INTO data_keys (key_id, master_key_id, wrapped, destroyed, block) VALUES (?, ?, ?, 0, ?)");
      this.select = this.db.prepare("SELECT key_id, master_key_id, wrapped, destroyed FROM data_keys WHERE key_id = ?");
      this.tombstone = this.db.prepare(
        "UPDATE data_keys SET wrapped = NULL, master_key_id = NULL, destroyed = 1, destroyed_seq = ? WHERE key_id = ? AND destroyed = 0",
      );
      this.lastSeq = this.db.prepare<[], number | null>("SELECT max(destroyed_seq) FROM data_keys WHERE destroyed_seq IS NOT NULL").pluck();
      this.destroyedAfter = this.db.prepare<[number], string>("SELECT key_id FROM data_keys WHERE destroyed_seq > ?").pluck();
      this.checkMasterKeys();
    } catch (err) {
      this.db.close();
      throw err;
    }
  }

  /** Creates `count` data keys wrapped by the current master key in one transaction (one fsync), reserved for the caller. */
  createBlock(count: number): DataKey[] {
    const block = randomBytes(9).toString("base64url");
    const material = randomBytes(count * DATA_KEY_BYTES);
    // A copy per key, so that zeroing one later (destroy, close) touches no other.
    const keys = newKeyIds(count).map((id, i): DataKey => ({ id, key: Buffer.from(material.subarray(i * DATA_KEY_BYTES, (i + 1) * DATA_KEY_BYTES)) }));
    material.fill(0);
    const current = this.masterKeys.current;
    this.db
      .transaction(() => {
        for (const k of keys) this.insert.run(k.id, current.id, wrap(current, k), block);
      })
      .immediate();
    return keys;
  }

  lookup(keyId: string): KeyLookup {
    const row = this.select.get(keyId);
    if (row === undefined) return { state: "unknown" };
    if (row.destroyed !== 0 || row.wrapped === null || row.master_key_id === null) return { state: "destroyed" };
    const master = this.byId.get(row.master_key_id);
    const key = master && unwrap(master, row.key_id, row.wrapped);
    return key ? { state: "live", key } : { state: "locked", masterKeyId: row.master_key_id };
  }

  /**
   * Turns these keys into tombstones for good: secure_delete (on for this connection) zeroes the bytes the update
   * frees, and a TRUNCATE checkpoint copies the zeroed pages into the file and cuts the WAL, older frames and all.
   * Throws when the checkpoint cannot finish (another connection reading an older snapshot): then the WAL may still
   * hold the wrapped keys, and calling again finishes the job.
   */
  destroy(keyIds: readonly string[]): void {
    this.db
      .transaction(() => {
        // Under the write lock: each destruction takes the next number, whichever process runs it.
        const seq = this.lastDestroyed() + 1;
        for (const id of keyIds) this.tombstone.run(seq, id);
      })
      .immediate();
    this.truncateWal();
  }

  /** The number of the latest destruction (0 when none was numbered): a process that saw it knows every one before. */
  lastDestroyed(): number {
    return this.lastSeq.get() ?? 0;
  }

  /** The keys destroyed after destruction `seq`, by any process sharing the vault. */
  destroyedSince(seq: number): string[] {
    return this.destroyedAfter.all(seq);
  }

  /** Re-wraps every live key not under the current master key, in one transaction; keys no configured master key unwraps are left. */
  rewrapAll(): number {
    const current = this.masterKeys.current;
    const update = this.db.prepare<[string, Buffer, string]>("UPDATE data_keys SET master_key_id = ?, wrapped = ? WHERE key_id = ?");
    const count = this.db
      .transaction(() => {
        let n = 0;
        const rows = this.db
          .prepare<[string], Row>("SELECT key_id, master_key_id, wrapped, destroyed FROM data_keys WHERE wrapped IS NOT NULL AND master_key_id <> ?")
          .all(current.id);
        for (const row of rows) {
          const master = row.master_key_id === null ? undefined : this.byId.get(row.master_key_id);
          const key = master && row.wrapped && unwrap(master, row.key_id, row.wrapped);
          if (!key) continue;
          update.run(current.id, wrap(current, { id: row.key_id, key }), row.key_id);
          key.fill(0);
          n++;
        }
        return n;
      })
      .immediate();
    // The old wrappings stay in the WAL until a checkpoint; cut it now, best effort (a busy reader only delays it).
    if (count > 0) this.db.pragma("wal_checkpoint(TRUNCATE)");
    return count;
  }

  close(): void {
    if (this.db.open) this.db.close();
  }

  /** A vault with live keys must have one that a configured master key unwraps; a fresh (or all-destroyed) vault adopts the current key. */
  private checkMasterKeys(): void {
    // One row per master key that wraps anything, the most recently written first.
    const rows = this.db
      .prepare<[], Row & { r: number }>(
        "SELECT max(rowid) AS r, key_id, master_key_id, wrapped, destroyed FROM data_keys WHERE wrapped IS NOT NULL GROUP BY master_key_id ORDER BY r DESC",
      )
      .all();
    if (rows.length === 0) return;
    for (const row of rows) {
      const master = row.master_key_id === null ? undefined : this.byId.get(row.master_key_id);
      const key = master && row.wrapped && unwrap(master, row.key_id, row.wrapped);
      if (key) {
        key.fill(0);
        return;
      }
    }
    throw new WrongMasterKeyError(
      `LANGGRAPH_AES_KEY does not open the key vault at ${this.path}: it was written with key ${rows[0].master_key_id}; set that key, or list it in LANGGRAPH_AES_PREVIOUS_KEYS`,
    );
  }

  private truncateWal(): void {
    const [result] = this.db.pragma("wal_checkpoint(TRUNCATE)") as { busy: number }[];
    if (Number(result.busy) !== 0) {
      throw new Error(`the WAL of the key vault at ${this.path} could not be checkpointed (busy): destroyed keys may remain in it until the next destroy`);
    }
  }
}

function wrap(master: MasterKey, dataKey: DataKey): Buffer {
  const { iv, tag, ciphertext } = gcmEncrypt(master.key, dataKey.key, dataKey.id);
  return Buffer.concat([iv, tag, ciphertext]);
}

function unwrap(master: MasterKey, keyId: string, wrapped: Buffer): Buffer | undefined {
  if (wrapped.length <= IV_BYTES + TAG_BYTES) return undefined;
  const sealed = {
    iv: wrapped.subarray(0, IV_BYTES),
    tag: wrapped.subarray(IV_BYTES, IV_BYTES + TAG_BYTES),
    ciphertext: wrapped.subarray(IV_BYTES + TAG_BYTES),
  };
  return gcmDecrypt(master.key, sealed, keyId);
}

/** Opens (creating if needed) the vault file, readable by its owner alone, in WAL mode with every commit synced. */
function openVaultDatabase(file: string): Database.Database {
  let db: Database.Database | undefined;
  try {
    mkdirSync(path.dirname(file), { recursive: true });
    // Created empty with mode 0600 first: SQLite gives its WAL and shared-memory files the database's mode.
    closeSync(openSync(file, "a", 0o600));
    db = new Database(file, { timeout: BUSY_TIMEOUT_MS });
    const mode = db.pragma("journal_mode = WAL", { simple: true });
    if (mode !== "wal") throw new Error(`cannot switch to WAL journal mode (got ${String(mode)})`);
    db.pragma("synchronous = FULL");
    // ON, not FAST: freed pages are zeroed too, so no page of the file keeps a destroyed key's wrapping.
    db.pragma("secure_delete = ON");
    const version = Number(db.pragma("user_version", { simple: true }));
    if (version > SCHEMA_VERSION) throw new Error(`it has schema version ${version}, newer than this server's ${SCHEMA_VERSION}`);
    if (version < SCHEMA_VERSION) {
      const init = db;
      init
        .transaction(() => {
          // Read again under the write lock: another process may have migrated it meanwhile.
          const from = Number(init.pragma("user_version", { simple: true }));
          for (const step of MIGRATIONS.slice(from)) init.exec(step);
          init.pragma(`user_version = ${SCHEMA_VERSION}`);
        })
        .immediate();
    }
    return db;
  } catch (err) {
    db?.close();
    const message = (err instanceof Error ? err.message : String(err)).replace(/\s+/g, " ");
    throw new Error(`cannot open the key vault at ${file}: ${message}`, { cause: err });
  }
}
