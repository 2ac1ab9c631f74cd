import type Database from "better-sqlite3";

/**
 * Erasing content from an SQLite file for real (a thread purge). A DELETE or an UPDATE only unlinks
 * the old bytes: they stay in the page's free space, on freelist pages and in the older frames of
 * the WAL until something happens to overwrite them. `secure_delete` makes SQLite zero what a
 * statement frees; a checkpoint in TRUNCATE mode copies the WAL's newest page images into the
 * database and cuts the WAL to zero bytes, older frames and all.
 */

/**
 * Runs `erase` in one write transaction with `secure_delete` on, then truncates the WAL. Only this
 * transaction pays for secure_delete: the connection's setting is restored after it.
 */
export function eraseForGood(db: Database.Database, erase: () => void): void {
  const before = Number(db.pragma("secure_delete", { simple: true }));
  db.pragma("secure_delete = ON");
  try {
    db.transaction(erase).immediate();
  } finally {
    db.pragma(`secure_delete = ${before === 2 ? "FAST" : before === 1 ? "ON" : "OFF"}`);
  }
  truncateWal(db);
}

/**
 * `secure_delete` for a connection, from its open on. FAST zeroes freed space inside b-tree pages
 * and pages that a split or a new root rebuilds, at no extra I/O: enough for an append-only log,
 * where a split would otherwise leave copies of rows in the unused part of the page it emptied.
 * ON also zeroes freed pages (overflow chains), at the cost of writing them: for a database whose
 * rows are rewritten in place (the read models), whose older versions would outlive a purge.
 */
export function zeroFreedContent(db: Database.Database, mode: "FAST" | "ON"): void {
  db.pragma(`secure_delete = ${mode}`);
}

/**
 * Checkpoints the whole WAL into the database and truncates it to zero bytes. A no-op without a WAL
 * (e.g. while the read models are rebuilt with an in-memory journal). Throws when the checkpoint
 * cannot finish: then older frames, and what they held, would still be on disk.
 */
export function truncateWal(db: Database.Database): void {
  if (String(db.pragma("journal_mode", { simple: true })).toLowerCase() !== "wal") return;
  const [result] = db.pragma("wal_checkpoint(TRUNCATE)") as { busy: number | bigint; log: number | bigint; checkpointed: number | bigint }[];
  if (Number(result.busy) !== 0) throw new Error(`the WAL of ${db.name} could not be checkpointed (busy): erased content may remain in it`);
}
