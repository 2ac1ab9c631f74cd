import type Database from "better-sqlite3";
import type { RecordedEvent } from "../eventstore/types.js";
import type { TableProjection } from "./table.js";
import { BatchedEntities } from "./batch.js";
import { ChangedColumnsWriter, flag, json, type ColumnOf } from "./changed-columns.js";
import { runsProjection } from "../../projections/runs.js";
import { RUN_STREAM_PREFIX, publicRun, runEventSchemas, runStatusOf, type RunStreamState, type RunView } from "../domain/runs.js";
import type { RunRecord, RunStatus } from "../domain/run-record.js";
import { THREAD_STREAM_PREFIX } from "../domain/threads.js";
import type { SqlFragment } from "./json-filter.js";
import { StatementCache } from "./statements.js";

/** Run events the read model folds: not the output chunks (they stay in `run-{id}` for the streams). */
const RUN_EVENT_TYPES = Object.keys(runEventSchemas).filter((t) => t !== "RunOutput");

/** The row's columns after run_id. The record and the columns taken from it are written when the run is enqueued, never after. */
const RUN_COLUMNS: readonly ColumnOf<RunView>[] = [
  { name: "thread_id", get: (v) => v.run.thread_id, insertOnly: true },
  { name: "assistant_id", get: (v) => v.run.assistant_id, insertOnly: true },
  { name: "status", get: (v) => runStatusOf(v.stream) },
  { name: "created_at", get: (v) => v.run.created_at, insertOnly: true },
  { name: "record", get: (v) => v.run, store: json, insertOnly: true },
  { name: "stream", get: (v) => v.stream, store: (s) => encodeStream(s as RunStreamState) },
  { name: "thread_finished", get: (v) => v.threadFinished, store: flag },
  { name: "claimed_open", get: (v) => (v.stream.owner && !v.stream.ended ? 1 : 0) },
  { name: "ended_unmarked", get: (v) => (v.stream.ended && !v.threadFinished ? 1 : 0) },
];

/**
 * Runs: the record as created, the status the API shows, and the folded stream state (claim,
 * lease, cancel request, terminal status; never the results). A deleted thread's runs leave the
 * table; the log keeps them.
 */
export const runsTable: TableProjection = {
  name: "runs",
  version: 2,
  ddl: [
    `CREATE TABLE runs (
       run_id TEXT PRIMARY KEY,
       thread_id TEXT NOT NULL,
       assistant_id TEXT NOT NULL,
       status TEXT NOT NULL,
       created_at TEXT NOT NULL,
       record TEXT NOT NULL,
       stream TEXT NOT NULL,
       thread_finished INTEGER NOT NULL,
       claimed_open INTEGER NOT NULL,
       ended_unmarked INTEGER NOT NULL
     )`,
    // A thread's runs, newest first: by created_at (a delayed run's is when it may start), then run id.
    "CREATE INDEX runs_thread ON runs (thread_id, created_at, run_id)",
    "CREATE INDEX runs_status ON runs (status, run_id)",
    "CREATE INDEX runs_assistant ON runs (assistant_id, run_id)",
    // What the run worker looks at when it starts: open claims, and ended runs whose thread was not told.
    "CREATE INDEX runs_claimed_open ON runs (run_id) WHERE claimed_open = 1",
    "CREATE INDEX runs_ended_unmarked ON runs (run_id) WHERE ended_unmarked = 1",
  ],
  streamPrefixes: [THREAD_STREAM_PREFIX, RUN_STREAM_PREFIX],
  eventTypes: ["RunEnqueued", "RunFinished", "RunDeleted", "ThreadDeleted", ...RUN_EVENT_TYPES],
  prepare(db) {
    const load = loader(db);
    const rows = new ChangedColumnsWriter<RunView>(db, "runs", "run_id", RUN_COLUMNS);
    const remove = db.prepare("DELETE FROM runs WHERE run_id = ?");
    const removeThreadRuns = db.prepare("DELETE FROM runs WHERE thread_id = ?");
    const write = (key: string, before: RunView | undefined, after: RunView | undefined) => {
      if (!after) {
        if (before) remove.run(key);
        return;
      }
      rows.write(key, before, after);
    };
    const entities = new BatchedEntities<RunView>(load, write);
    return {
      apply(event: RecordedEvent) {
        if (event.type === "ThreadDeleted") {
          // Set-based: write what the batch changed so far, then remove every run of the thread.
          entities.flush();
          removeThreadRuns.run(event.streamId.slice(THREAD_STREAM_PREFIX.length));
          return;
        }
        const key = runsProjection.key(event);
        // A run is enqueued once, under a new id.
        if (key !== undefined) entities.update(key, (state) => runsProjection.evolve(state, event), event.type === "RunEnqueued");
      },
      flush: () => entities.flush(),
    };
  },
};

/** bigint revisions survive the trip through JSON as strings. */
function encodeStream(s: RunStreamState): string {
  return JSON.stringify({ ...s, revision: typeof s.revision === "bigint" ? String(s.revision) : s.revision });
}

function decodeStream(text: string): RunStreamState {
  const s = JSON.parse(text) as Omit<RunStreamState, "revision"> & { revision: string };
  return { ...s, revision: s.revision === "no_stream" ? "no_stream" : BigInt(s.revision) };
}

interface RunRow {
  record: string;
  stream: string;
  thread_finished: number;
}

const viewOf = (r: RunRow): RunView => ({ run: JSON.parse(r.record) as RunRecord, stream: decodeStream(r.stream), threadFinished: r.thread_finished === 1 });

function loader(db: Database.Database): (id: string) => RunView | undefined {
  const row = db.prepare("SELECT record, stream, thread_finished FROM runs WHERE run_id = ?");
  return (id) => {
    const r = row.get(id) as RunRow | undefined;
    return r && viewOf(r);
  };
}

function assistantWhere(assistantId: string, q: { threadId?: string; extra?: readonly SqlFragment[] }): SqlFragment[] {
  // With a thread, its index (a thread has few runs); the unary + keeps SQLite off runs_assistant.
  const where: SqlFragment[] = [{ sql: q.threadId === undefined ? "runs.assistant_id = ?" : "+runs.assistant_id = ?", params: [assistantId] }];
  if (q.threadId !== undefined) where.push({ sql: "runs.thread_id = ?", params: [q.threadId] });
  if (q.extra) where.push(...q.extra);
  return where;
}

export interface RunDoneness {
  threadId: string;
  threadFinished: boolean;
  temporary: boolean;
}

/** Queries of the runs read model. */
export class RunsReadModel {
  readonly load: (id: string) => RunView | undefined;
  private readonly cache: StatementCache;
  private readonly donenessRow: Database.Statement;

  constructor(private readonly db: Database.Database) {
    this.load = loader(db);
    this.cache = new StatementCache(db);
    this.donenessRow = db.prepare("SELECT thread_id, thread_finished, json_extract(record, '$.kwargs.temporary') FROM runs WHERE run_id = ?").raw();
  }

  /**
   * What a waiter asks of a run on every wake-up: its thread, whether the thread marked it finished, and whether that
   * thread is temporary. Read without parsing the run's record (its input and config), which a wait did four times.
   */
  doneness(id: string): RunDoneness | undefined {
    const row = this.donenessRow.get(id) as [string, number | bigint, number | bigint | null] | undefined;
    return row && { threadId: row[0], threadFinished: Number(row[1]) === 1, temporary: Number(row[2]) === 1 };
  }

  /**
   * A thread's runs as the API shows them: `created_at` descending, as the Python server orders them
   * (the JS dev server keeps insertion order). A run delayed by `after_seconds` is created at the time
   * it may start, so it comes before runs made after it. Runs created within the same millisecond
   * (our timestamps' precision) come newest first: by run id, which is time-ordered.
   */
  listForThread(threadId: string, q: { limit: number; offset: number; status?: RunStatus; extra?: readonly SqlFragment[] }): RunRecord[] {
    const where: SqlFragment[] = [{ sql: "runs.thread_id = ?", params: [threadId] }];
    if (q.status !== undefined) where.push({ sql: "runs.status = ?", params: [q.status] });
    if (q.extra) where.push(...q.extra);
    const sql = `SELECT record, stream, thread_finished FROM runs WHERE ${where.map((w) => `(${w.sql})`).join(" AND ")} ORDER BY created_at DESC, run_id DESC LIMIT ? OFFSET ?`;
    return (this.cache.get(sql).all(...where.flatMap((w) => w.params), q.limit, q.offset) as RunRow[]).map((r) => publicRun(viewOf(r)));
  }

  /**
   * An assistant's runs (of one thread when `threadId` is set), newest first; A2A lists its tasks
   * with it. Served by `runs_assistant` (or `runs_thread`).
   */
  listByAssistant(assistantId: string, q: { threadId?: string; limit: number; offset: number; extra?: readonly SqlFragment[] }): RunRecord[] {
    const where = assistantWhere(assistantId, q);
    const sql = `SELECT record, stream, thread_finished FROM runs WHERE ${where.map((w) => `(${w.sql})`).join(" AND ")} ORDER BY run_id DESC LIMIT ? OFFSET ?`;
    return (this.cache.get(sql).all(...where.flatMap((w) => w.params), q.limit, q.offset) as RunRow[]).map((r) => publicRun(viewOf(r)));
  }

  /** How many runs `listByAssistant` pages through. */
  countByAssistant(assistantId: string, q: { threadId?: string; extra?: readonly SqlFragment[] } = {}): number {
    const where = assistantWhere(assistantId, q);
    const sql = `SELECT count(*) FROM runs WHERE ${where.map((w) => `(${w.sql})`).join(" AND ")}`;
    return Number(
      this.cache
        .get(sql)
        .pluck()
        .get(...where.flatMap((w) => w.params)),
    );
  }

  /** Runs not ended, of the given statuses (pending, running). */
  activeWithStatus(statuses: readonly RunStatus[], extra: readonly SqlFragment[] = []): RunView[] {
    const where = [{ sql: "runs.status IN (SELECT value FROM json_each(?))", params: [JSON.stringify(statuses)] }, ...extra];
    const sql = `SELECT record, stream, thread_finished FROM runs WHERE ${where.map((w) => `(${w.sql})`).join(" AND ")} ORDER BY run_id`;
    return (this.cache.get(sql).all(...where.flatMap((w) => w.params)) as RunRow[]).map(viewOf);
  }

  /** A thread's runs that have not ended. */
  activeOfThread(threadId: string): RunView[] {
    const sql = "SELECT record, stream, thread_finished FROM runs WHERE thread_id = ? AND status IN ('pending', 'running') ORDER BY run_id";
    return (this.cache.get(sql).all(threadId) as RunRow[]).map(viewOf);
  }

  /** Runs claimed by some worker and not ended. */
  openClaims(): RunView[] {
    return (this.cache.get("SELECT record, stream, thread_finished FROM runs WHERE claimed_open = 1").all() as RunRow[]).map(viewOf);
  }

  /** Runs that ended but whose thread has not got its RunFinished mark (a crash in between). */
  endedUnmarked(): RunView[] {
    return (this.cache.get("SELECT record, stream, thread_finished FROM runs WHERE ended_unmarked = 1").all() as RunRow[]).map(viewOf);
  }

  count(): number {
    return Number(this.db.prepare("SELECT count(*) FROM runs").pluck().get());
  }

  /** How many runs have each status (the metrics' gauges; one pass over the status index). */
  countByStatus(): Record<string, number> {
    const rows = this.cache.get("SELECT status, count(*) AS n FROM runs GROUP BY status").all() as { status: string; n: number | bigint }[];
    return Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
  }
}
