import { mkdirSync, statSync } from "node:fs";
import path from "node:path";
import Database from "better-sqlite3";
import { StoreUnavailableError } from "./types.js";
import { zeroFreedContent } from "./sqlite-erase.js";

export type Synchronous = "FULL" | "NORMAL";

/**
 * Schema version kept in `PRAGMA user_version`.
 *   1: events and streams tables.
 *   2: index on (type, position), for reads filtered by event type (an older file is upgraded in place).
 *   3: no streams table: a stream's revision is read from the (stream_id, revision) index, so an append no
 *      longer writes a second B-tree per stream (an older file drops it in place). A new file's position is
 *      a plain INTEGER PRIMARY KEY: no row of the log is ever deleted (a purge rewrites rows in place), so
 *      SQLite's next rowid, the largest plus one, is never one used before, without AUTOINCREMENT's
 *      sqlite_sequence row read and written on every insert (an older file keeps AUTOINCREMENT: same
 *      positions either way).
 */
const SCHEMA_VERSION = 3n;
/** Versions a read-only open can read: every query a reader makes works on both (3 only stopped writing a table no read uses). */
const READABLE_VERSIONS: readonly bigint[] = [2n, SCHEMA_VERSION];

/** How long an open waits for a lock held by a process that is just shutting down. */
const LOCK_WAIT_MS = 200;

const SCHEMA = `
CREATE TABLE events (
  position  INTEGER PRIMARY KEY,               -- global, strictly increasing, never reused (no row is deleted)
  stream_id TEXT    NOT NULL,
  revision  INTEGER NOT NULL,                  -- 0-based per stream
  event_id  TEXT    NOT NULL UNIQUE,           -- idempotency
  type      TEXT    NOT NULL,
  data      TEXT    NOT NULL,                  -- JSON
  metadata  TEXT,                              -- JSON, NULL when empty
  created   INTEGER NOT NULL,                  -- ms since the Unix epoch
  UNIQUE (stream_id, revision)                 -- also a stream's revision: its last entry
);
`;

/**
 * Version 2: reads filtered by type walk this index (type, then position, i.e. the rowid) one type at a time
 * and touch only the rows they return, instead of every row of the log.
 */
const TYPE_INDEX = "CREATE INDEX IF NOT EXISTS events_type_position ON events (type, position);";

/**
 * Opens (creating if needed) the event database, owned exclusively by this process.
 * Any failure is a StoreUnavailableError with a one-line message.
 */
export function openDatabase(file: string, synchronous: Synchronous): Database.Database {
  const dir = path.dirname(file);
  try {
    mkdirSync(dir, { recursive: true });
  } catch (err) {
    throw new StoreUnavailableError(oneLine(`cannot create directory ${dir} for database ${file}: ${messageOf(err)}`), {
      cause: err,
    });
  }
  let db: Database.Database | undefined;
  try {
    db = new Database(file, { timeout: LOCK_WAIT_MS });
    db.defaultSafeIntegers(true);
    // Exclusive locking before the first access: the WAL then needs no shared memory, and the lock taken at the
    // first access is held until close, so a second process (or connection) fails to open the file.
    db.pragma("locking_mode = EXCLUSIVE");
    const mode = db.pragma("journal_mode = WAL", { simple: true });
    if (mode !== "wal") throw new Error(`cannot switch to WAL journal mode (got ${String(mode)})`);
    db.pragma(`synchronous = ${synchronous}`);
    db.pragma("temp_store = MEMORY");
    db.pragma("cache_size = -4096"); // 4 MiB: appends and tail reads touch the end of the log (recent events are also held parsed, sqlite-recent); memory stays bounded
    db.pragma("wal_autocheckpoint = 4096"); // pages; fewer, larger checkpoints
    db.pragma("journal_size_limit = 67108864");
    zeroFreedContent(db, "FAST"); // a purge must find no stale copy of its rows in free space
    migrate(db, file);
    return db;
  } catch (err) {
    try {
      db?.close();
    } catch {
      // already unusable
    }
    if (err instanceof StoreUnavailableError) throw err;
    throw new StoreUnavailableError(describeOpenError(file, err), { cause: err });
  }
}

/**
 * Opens an existing event database read-only, without the exclusive lock (for tools such as
 * `npm run replay`). While a server holds its exclusive lock, the first read fails with
 * StoreUnavailableError "locked": the tool then asks that server instead (it owns the only
 * consistent view, its WAL being private to it).
 */
export function openDatabaseReadOnly(file: string): Database.Database {
  let db: Database.Database | undefined;
  try {
    db = new Database(file, { readonly: true, fileMustExist: true, timeout: LOCK_WAIT_MS });
    db.defaultSafeIntegers(true);
    const version = db.pragma("user_version", { simple: true }) as bigint; // the first read: fails while locked
    if (!READABLE_VERSIONS.includes(version))
      throw new StoreUnavailableError(`database ${file} has schema version ${version}, this tool reads ${READABLE_VERSIONS.join(" and ")}`);
    return db;
  } catch (err) {
    try {
      db?.close();
    } catch {
      // already unusable
    }
    if (err instanceof StoreUnavailableError) throw err;
    throw new StoreUnavailableError(describeOpenError(file, err), { cause: err });
  }
}

function migrate(db: Database.Database, file: string): void {
  // BEGIN IMMEDIATE takes the write lock now, even when there is nothing to create.
  db.transaction(() => {
    const version = db.pragma("user_version", { simple: true }) as bigint;
    if (version === SCHEMA_VERSION) return;
    if (version > SCHEMA_VERSION) {
      throw new StoreUnavailableError(`database ${file} has schema version ${version}, newer than this server understands (${SCHEMA_VERSION})`);
    }
    if (version === 0n) {
      const tables = db.prepare("SELECT count(*) FROM sqlite_master").pluck().get() as bigint;
      if (tables !== 0n) throw new StoreUnavailableError(`database ${file} is not an event store (unknown tables, no schema version)`);
      db.exec(SCHEMA);
    }
    // Upgrades, each from the version before; in the same transaction, so a crash leaves the old version intact.
    db.exec(TYPE_INDEX); // 1 → 2
    db.exec("DROP TABLE IF EXISTS streams"); // 2 → 3
    db.pragma(`user_version = ${SCHEMA_VERSION}`);
  }).immediate();
}

function describeOpenError(file: string, err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  switch (code) {
    case "SQLITE_BUSY":
    case "SQLITE_LOCKED":
      return `database ${file} is locked by another process`;
    case "SQLITE_NOTADB":
      return `database ${file} is not an SQLite database`;
    case "SQLITE_CORRUPT":
      return oneLine(`database ${file} is corrupt: ${messageOf(err)}`);
    case "SQLITE_CANTOPEN":
    case "SQLITE_PERM":
    case "SQLITE_READONLY":
    case "SQLITE_AUTH":
      return oneLine(`cannot open database ${file}: ${isDirectory(file) ? "it is a directory" : messageOf(err)}`);
    default:
      return oneLine(`cannot open database ${file}: ${messageOf(err)}`);
  }
}

function isDirectory(file: string): boolean {
  try {
    return statSync(file).isDirectory();
  } catch {
    return false;
  }
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function oneLine(s: string): string {
  return s.replace(/\s+/g, " ").trim();
}
