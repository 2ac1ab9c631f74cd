import type Database from "better-sqlite3";
import type { RecordedEvent } from "../eventstore/types.js";
import type { TableProjection } from "./table.js";
import { CRON_STREAM_PREFIX } from "../domain/crons.js";
import { isEvent } from "../domain/event-of.js";

/**
 * Whose each cron is, for its erasure: the thread it runs on and its owner (`metadata.owner`, as custom auth stamps
 * it; the latest one). Unlike the crons table, a row stays when its cron is deleted: a deleted cron's payload (the
 * input, config and context of every run it started) is still in the log, until the purge of its thread or the
 * erasure of its owner removes it (src/app/cron-purge.ts), which asks here. A row whose stream was purged stays too
 * (the purge looks at the stream before it acts). A new table: the first start of this version rebuilds the
 * read-model database from the log.
 */
export const cronOwnersTable: TableProjection = {
  name: "cron_owners",
  version: 1,
  ddl: [
    "CREATE TABLE cron_owners (cron_id TEXT PRIMARY KEY, thread_id TEXT, owner TEXT)",
    "CREATE INDEX cron_owners_thread ON cron_owners (thread_id) WHERE thread_id IS NOT NULL",
    "CREATE INDEX cron_owners_owner ON cron_owners (owner) WHERE owner IS NOT NULL",
  ],
  streamPrefixes: [CRON_STREAM_PREFIX],
  eventTypes: ["CronCreated", "CronUpdated"],
  prepare(db) {
    const created = db.prepare<[string, string | null, string | null]>(
      `INSERT INTO cron_owners (cron_id, thread_id, owner) VALUES (?, ?, ?)
       ON CONFLICT (cron_id) DO UPDATE SET thread_id = excluded.thread_id, owner = excluded.owner`,
    );
    const threadChanged = db.prepare<[string | null, string]>("UPDATE cron_owners SET thread_id = ? WHERE cron_id = ?");
    const ownerChanged = db.prepare<[string | null, string]>("UPDATE cron_owners SET owner = ? WHERE cron_id = ?");
    return (event: RecordedEvent) => {
      const cronId = event.streamId.slice(CRON_STREAM_PREFIX.length);
      if (isEvent(event, "CronCreated")) {
        created.run(cronId, event.data.thread_id, ownerOf(event.data.metadata));
      } else if (isEvent(event, "CronUpdated")) {
        if (event.data.thread_id !== undefined) threadChanged.run(event.data.thread_id, cronId);
        if (event.data.metadata !== undefined) ownerChanged.run(ownerOf(event.data.metadata), cronId);
      }
    };
  },
};

const ownerOf = (metadata: Record<string, unknown>): string | null => (typeof metadata.owner === "string" ? metadata.owner : null);

/** The crons, live or deleted, that a thread's purge or an owner's erasure removes. */
export class CronOwnersReadModel {
  private readonly ofThreadStmt: Database.Statement<[string], string>;
  private readonly ofOwnerStmt: Database.Statement<[string], string>;

  constructor(db: Database.Database) {
    this.ofThreadStmt = db.prepare<[string], string>("SELECT cron_id FROM cron_owners WHERE thread_id = ? ORDER BY cron_id").pluck();
    this.ofOwnerStmt = db.prepare<[string], string>("SELECT cron_id FROM cron_owners WHERE owner = ? ORDER BY cron_id").pluck();
  }

  /** Crons that run (or ran) on the thread. */
  ofThread(threadId: string): string[] {
    return this.ofThreadStmt.all(threadId);
  }

  /** Crons whose `metadata.owner` is `owner`. */
  ofOwner(owner: string): string[] {
    return this.ofOwnerStmt.all(owner);
  }
}
