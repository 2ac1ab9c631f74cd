import type Database from "better-sqlite3";
import type { RecordedEvent } from "../eventstore/types.js";
import type { TableProjection } from "./table.js";
import { CHECKPOINT_STREAM_PREFIX, isKeepLatestPrune } from "../domain/checkpoint-events.js";
import { isEvent, isEventOf, type AnyEvent } from "../domain/event-of.js";
import { THREAD_STREAM_PREFIX } from "../domain/threads.js";

/**
 * The thread events that may come with new checkpoints (a run, a state update, a creation or copy),
 * and the app time each carries: a thread's checkpoints are only written between them. A metadata
 * update (ThreadUpdated) writes none and does not count.
 */
function activityAt(event: AnyEvent): string | undefined {
  if (isEvent(event, "ThreadCreated")) return event.data.created_at;
  if (isEvent(event, "ThreadStateUpdated")) return event.data.updated_at;
  if (isEvent(event, "RunEnqueued")) return event.data.run.created_at;
  if (isEvent(event, "RunFinished")) return event.data.finished_at;
  return undefined;
}

/** Whether an event of a checkpoint stream is a sweep: every checkpoint deleted, or all but the latest of each namespace. */
export function isSweepEvent(event: AnyEvent): boolean {
  return isEvent(event, "CheckpointsDeleted") || (isEvent(event, "CheckpointsDiscarded") && isKeepLatestPrune(event.data.reason));
}

/**
 * The checkpoint TTL's read model (`checkpointer.ttl`, src/app/checkpoint-ttl-sweeper.ts): per live
 * thread, when checkpoints were last written to it (`active_at`, epoch ms of its last run, state
 * update or creation as the app's clock stamped it; `active_position`, that event's place in the
 * log) and whether it was swept since (`swept`: its checkpoints deleted, or pruned to the latest,
 * after that activity). A new table: the read-model database's fingerprint changes with it, so the
 * first start of this version rebuilds that database from the log (see CatchUpRunner).
 * Fed by the thread streams' activity and the checkpoint streams' two small sweep events
 * (CheckpointsDeleted, a keep_latest CheckpointsDiscarded), never by the checkpoints themselves,
 * which the read models leave alone. The sweeper asks the partial index for the oldest unswept rows.
 * A deleted or purged thread leaves the table (its checkpoints went with it).
 */
export const checkpointTtlTable: TableProjection = {
  name: "checkpoint_ttl",
  version: 1,
  ddl: [
    `CREATE TABLE checkpoint_ttl (
       thread_id TEXT PRIMARY KEY,
       active_at INTEGER NOT NULL,
       active_position INTEGER NOT NULL,
       swept INTEGER NOT NULL
     )`,
    "CREATE INDEX checkpoint_ttl_due ON checkpoint_ttl (active_at) WHERE swept = 0",
  ],
  streamPrefixes: [THREAD_STREAM_PREFIX, CHECKPOINT_STREAM_PREFIX],
  eventTypes: [
    "ThreadCreated",
    "ThreadStateUpdated",
    "RunEnqueued",
    "RunFinished",
    "ThreadDeleted",
    "ThreadPurged",
    "CheckpointsDeleted",
    "CheckpointsDiscarded",
  ],
  prepare(db) {
    const created = db.prepare(
      `INSERT INTO checkpoint_ttl (thread_id, active_at, active_position, swept) VALUES (?, ?, ?, 0)
       ON CONFLICT (thread_id) DO UPDATE SET active_at = excluded.active_at, active_position = excluded.active_position, swept = 0`,
    );
    // A later activity only: the app times of two processes need not be in log order.
    const active = db.prepare("UPDATE checkpoint_ttl SET active_at = max(active_at, ?), active_position = ?, swept = 0 WHERE thread_id = ?");
    const removed = db.prepare("DELETE FROM checkpoint_ttl WHERE thread_id = ?");
    const swept = db.prepare("UPDATE checkpoint_ttl SET swept = 1 WHERE thread_id = ? AND swept = 0");
    return (event: RecordedEvent) => {
      if (event.streamId.startsWith(CHECKPOINT_STREAM_PREFIX)) {
        if (isSweepEvent(event)) swept.run(event.streamId.slice(CHECKPOINT_STREAM_PREFIX.length));
        return;
      }
      const threadId = event.streamId.slice(THREAD_STREAM_PREFIX.length);
      if (isEventOf(event, ["ThreadDeleted", "ThreadPurged"])) return void removed.run(threadId);
      const at = activityAt(event);
      const ms = at === undefined ? Number.NaN : Date.parse(at);
      if (Number.isNaN(ms)) return;
      if (isEvent(event, "ThreadCreated")) created.run(threadId, ms, event.position);
      else active.run(ms, event.position, threadId);
    };
  },
};

/** A thread the checkpoint TTL may sweep: its last activity and where in the log it was. */
export interface CheckpointTtlRow {
  thread_id: string;
  /** Epoch ms. */
  active_at: bigint;
  active_position: bigint;
}

/** The checkpoint TTL sweeper's questions. */
export class CheckpointTtlReadModel {
  private readonly dueStmt: Database.Statement;
  private readonly rowStmt: Database.Statement;
  private readonly firstStmt: Database.Statement;

  constructor(db: Database.Database) {
    this.dueStmt = db
      .prepare("SELECT thread_id, active_at, active_position FROM checkpoint_ttl WHERE swept = 0 AND active_at <= ? ORDER BY active_at LIMIT ?")
      .safeIntegers(true);
    this.rowStmt = db.prepare("SELECT thread_id, active_at, active_position FROM checkpoint_ttl WHERE thread_id = ? AND swept = 0").safeIntegers(true);
    this.firstStmt = db.prepare("SELECT min(active_at) FROM checkpoint_ttl WHERE swept = 0").pluck();
  }

  /** Unswept threads whose last activity was at or before `cutoff` (epoch ms), least recently active first. */
  due(cutoff: number, limit: number): CheckpointTtlRow[] {
    return this.dueStmt.all(cutoff, limit) as CheckpointTtlRow[];
  }

  /** The thread's row if it is unswept (undefined: swept, deleted, or never seen). */
  unswept(threadId: string): CheckpointTtlRow | undefined {
    return this.rowStmt.get(threadId) as CheckpointTtlRow | undefined;
  }

  /** The oldest activity not yet swept (epoch ms), if any. */
  oldestUnswept(): number | undefined {
    return (this.firstStmt.get() as number | null) ?? undefined;
  }
}
