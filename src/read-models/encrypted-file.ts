import { hkdfSync } from "node:crypto";
import { closeSync, openSync, readSync } from "node:fs";
import { createRequire } from "node:module";
import Database from "better-sqlite3";
import type CipherDatabase from "better-sqlite3-multiple-ciphers";
import type { MasterKeys } from "../crypto/master-keys.js";

/**
 * The read-model database encrypted at rest (with LANGGRAPH_AES_KEY), by SQLite3 Multiple Ciphers
 * (better-sqlite3-multiple-ciphers: better-sqlite3's API over SQLite with a page cipher). Every page
 * of the file and of its WAL is sealed with AEGIS-256 (the library's `aegis` cipher): authenticated
 * (a wrong key or a changed page is caught, not read as garbage), and built on the AES round, so with
 * the AES instructions of server CPUs it adds a seventh of what ChaCha20-Poly1305 (the library's
 * default, which earlier versions used) adds to a write transaction. A file of the earlier cipher does
 * not open under the same key: it is a ReadModelsKeyMismatch, and the read models are rebuilt from the
 * log. SQLCipher's format would only buy opening the file with the sqlcipher shell, which a cache
 * rebuilt from the log does not need.
 *
 * The key is derived from the current master key, never stored: the read models are a cache of the
 * log, so a new master key means a file that no longer opens (ReadModelsKeyMismatch) and a rebuild.
 */

/** HKDF's info: a key for this purpose only, unrelated to what the master key wraps in the key vault. */
const KEY_INFO = "agent-server read models";
const KEY_BYTES = 32;
const CIPHER = "aegis";
/** The first 16 bytes of every unencrypted SQLite file; an encrypted file starts with its random salt. */
const SQLITE_MAGIC = Buffer.from("SQLite format 3\0", "latin1");

/** The key of the read-model database: HKDF-SHA256 of the current master key (no salt: the master key is already a key). */
export function readModelsKeyOf(masterKeys: MasterKeys): Buffer {
  return Buffer.from(hkdfSync("sha256", masterKeys.current.key, Buffer.alloc(0), KEY_INFO, KEY_BYTES));
}

/**
 * The file exists but the key given does not open it: written without encryption before the key was
 * set, with another master key, or encrypted while no key is set now. The read models are a cache of
 * the log: delete the file (with its -wal and -shm) and open again, to rebuild them.
 */
export class ReadModelsKeyMismatch extends Error {
  override name = "ReadModelsKeyMismatch";
  constructor(
    readonly file: string,
    readonly found: "plaintext" | "encrypted",
    readonly keyGiven: boolean,
    options?: ErrorOptions,
  ) {
    super(
      keyGiven
        ? found === "plaintext"
          ? `read-model database ${file} was written without encryption and LANGGRAPH_AES_KEY is now set: rebuild it from the log`
          : `read-model database ${file} is encrypted with another key (LANGGRAPH_AES_KEY changed) or by an earlier version's cipher: rebuild it from the log`
        : `read-model database ${file} is encrypted and LANGGRAPH_AES_KEY is not set: rebuild it from the log`,
      options,
    );
  }
}

type DatabaseConstructor = typeof Database;
let cipherDatabase: DatabaseConstructor | undefined;

/**
 * The library's constructor, loaded on first use: without a key the server neither loads a second
 * SQLite nor needs it to have been built. Its API is better-sqlite3's (it is a fork that follows its
 * releases), so the read models keep one Database type whichever opened the file.
 */
function cipherConstructor(): DatabaseConstructor {
  // Typed as its own package declares it; the assignment is what checks that the two APIs still agree.
  cipherDatabase ??= createRequire(import.meta.url)("better-sqlite3-multiple-ciphers") as typeof CipherDatabase;
  return cipherDatabase;
}

/**
 * Opens `file` with `key` (undefined: plain better-sqlite3, as without encryption). Keying is the
 * first statement, before anything reads the file; whether the key fits is only known at the first
 * read, see keyMismatchOf.
 */
export function openDatabase(file: string, options: Database.Options, key: Buffer | undefined): Database.Database {
  if (key === undefined || file === ":memory:") return new Database(file, options);
  if (key.length !== KEY_BYTES) throw new RangeError(`the read models' key must be ${KEY_BYTES} bytes (see readModelsKeyOf)`);
  const db = new (cipherConstructor())(file, options);
  try {
    db.pragma(`cipher = '${CIPHER}'`);
    // A raw key (x'…'): it is already the output of a KDF, another (PBKDF2) would only slow each open.
    db.pragma(`key = "x'${key.toString("hex")}'"`);
    return db;
  } catch (error) {
    db.close();
    throw error;
  }
}

/**
 * Called when the first read of `file` failed as "not a database": a ReadModelsKeyMismatch when the
 * file is a database the key does not fit (plaintext with a key; encrypted with another key, or
 * while no key is given), else undefined: a file torn or overwritten, removed and rebuilt as before.
 */
export function keyMismatchOf(file: string, key: Buffer | undefined, cause: unknown): ReadModelsKeyMismatch | undefined {
  if (file === ":memory:") return undefined;
  const kind = kindOfFile(file);
  if (kind === "plaintext" && key !== undefined) return new ReadModelsKeyMismatch(file, kind, true, { cause });
  if (kind === "encrypted") return new ReadModelsKeyMismatch(file, kind, key !== undefined, { cause });
  return undefined;
}

/**
 * What page 1's header says. An unencrypted file starts with SQLite's magic. An encrypted one starts
 * with its salt, and keeps header bytes 16 to 23 in clear (SQLite reads the page size before any
 * key applies): the payload fractions every SQLite file has (64, 32, 32), after a nonzero count of
 * bytes reserved at the end of each page (the cipher's nonce and tag). Anything else is no database.
 */
function kindOfFile(file: string): "plaintext" | "encrypted" | undefined {
  let fd: number;
  try {
    fd = openSync(file, "r");
  } catch {
    return undefined;
  }
  try {
    const head = Buffer.alloc(24);
    if (readSync(fd, head, 0, head.length, 0) < head.length) return undefined;
    if (head.subarray(0, SQLITE_MAGIC.length).equals(SQLITE_MAGIC)) return "plaintext";
    if (head[20] > 0 && head[21] === 64 && head[22] === 32 && head[23] === 32) return "encrypted";
    return undefined;
  } finally {
    closeSync(fd);
  }
}
