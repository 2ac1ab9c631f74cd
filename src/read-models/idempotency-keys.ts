import type Database from "better-sqlite3";
import type { RecordedEvent } from "../eventstore/types.js";
import type { TableProjection } from "./table.js";
import { IDEMPOTENCY_STREAM_PREFIX } from "../domain/idempotency.js";
import { isEvent } from "../domain/event-of.js";

/**
 * Which `Idempotency-Key` streams hold a request on each thread: a claim holds the request's fingerprint (a hash of
 * its body) and, in events written before only its ids were recorded, the whole run. A thread's purge removes those
 * streams with the thread's own (src/app/audit.ts), so that nothing of its requests outlives it. A key claimed for a
 * thread (a run on `/threads/{id}`) is known at its claim; one of a stateless run when its run is recorded. A key
 * used again after it expired, for another thread, is on both rows, and goes with either thread's purge. Rows stay
 * after a purge (the purge reads here before it acts). A new table: the first start of this version rebuilds the
 * read-model database from the log.
 */
export const idempotencyKeysTable: TableProjection = {
  name: "idempotency_keys",
  version: 1,
  ddl: [
    "CREATE TABLE idempotency_keys (stream_id TEXT NOT NULL, thread_id TEXT NOT NULL, PRIMARY KEY (stream_id, thread_id)) WITHOUT ROWID",
    "CREATE INDEX idempotency_keys_thread ON idempotency_keys (thread_id)",
  ],
  streamPrefixes: [IDEMPOTENCY_STREAM_PREFIX],
  eventTypes: ["IdempotencyKeyClaimed", "IdempotentRunCreated"],
  prepare(db) {
    const onThread = db.prepare<[string, string]>("INSERT OR IGNORE INTO idempotency_keys (stream_id, thread_id) VALUES (?, ?)");
    return (event: RecordedEvent) => {
      if (isEvent(event, "IdempotencyKeyClaimed")) {
        if (event.data.thread_id !== null) onThread.run(event.streamId, event.data.thread_id);
      } else if (isEvent(event, "IdempotentRunCreated")) {
        const data = event.data;
        onThread.run(event.streamId, "run" in data ? data.run.thread_id : data.thread_id);
      }
    };
  },
};

/** The `Idempotency-Key` streams a thread's purge removes. */
export class IdempotencyKeysReadModel {
  private readonly ofThreadStmt: Database.Statement<[string], string>;

  constructor(db: Database.Database) {
    this.ofThreadStmt = db.prepare<[string], string>("SELECT stream_id FROM idempotency_keys WHERE thread_id = ? ORDER BY stream_id").pluck();
  }

  /** Streams of keys that claimed (or created) a run on the thread. */
  ofThread(threadId: string): string[] {
    return this.ofThreadStmt.all(threadId);
  }
}
