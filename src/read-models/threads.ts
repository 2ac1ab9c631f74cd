import type Database from "better-sqlite3";
import type { RecordedEvent } from "../eventstore/types.js";
import type { TableProjection } from "./table.js";
import { BatchedEntities } from "./batch.js";
import { ChangedColumnsWriter, flag, json, jsonOrNull, orNull, type ColumnOf } from "./changed-columns.js";
import { threadsProjection } from "../../projections/threads.js";
import { THREAD_STREAM_PREFIX, threadEventSchemas, type Thread, type ThreadState, type ThreadStatus } from "../domain/threads.js";
import type { JsonObject } from "../domain/json.js";
import { metadataIndexDdl, metadataSource, prepareMetadataIndex, type FilteredSource } from "./metadata-index.js";
import { containsSql, type SqlFragment } from "./json-filter.js";
import { pageAndCount, countWhere, StatementCache, type SortOrder } from "./statements.js";

/** The row's columns after thread_id, in COLUMN_NAMES order: what each holds of the state, and how. */
const THREAD_COLUMNS: readonly ColumnOf<ThreadState>[] = [
  { name: "revision", get: (s) => s.revision },
  { name: "deleted", get: (s) => s.deleted, store: flag },
  { name: "status", get: (s) => s.thread.status },
  { name: "resting_status", get: (s) => s.restingStatus },
  { name: "active_runs", get: (s) => s.activeRuns, store: json },
  { name: "created_at", get: (s) => s.thread.created_at },
  { name: "updated_at", get: (s) => s.thread.updated_at },
  { name: "state_updated_at", get: (s) => s.thread.state_updated_at },
  { name: "metadata", get: (s) => s.thread.metadata, store: json },
  { name: "config", get: (s) => s.thread.config, store: json },
  { name: "values", get: (s) => s.thread.values, store: jsonOrNull },
  { name: "interrupts", get: (s) => s.thread.interrupts, store: json },
  // An error of null is stored as JSON null (read back as error: null); only an absent one is NULL.
  { name: "error", get: (s) => s.thread.error, store: (v) => (v === undefined ? null : JSON.stringify(v)) },
  { name: "expires_at", get: (s) => s.expiresAt, store: orNull },
  { name: "purged", get: (s) => s.purged, store: flag },
];

const COLUMN_NAMES =
  'thread_id, revision, deleted, status, resting_status, active_runs, created_at, updated_at, state_updated_at, metadata, config, "values", interrupts, error, expires_at, purged';
const COLUMNS = COLUMN_NAMES;
/** The same columns qualified, for queries that join the metadata index. */
const QUALIFIED = COLUMN_NAMES.split(", ")
  .map((c) => `threads.${c}`)
  .join(", ");

/**
 * Threads, one row each. A deleted thread stays as a tombstone (id and revision, for the next
 * command's expected revision) without its values or metadata.
 */
export const threadsTable: TableProjection = {
  name: "threads",
  version: 5,
  ddl: [
    `CREATE TABLE threads (
       thread_id TEXT PRIMARY KEY,
       revision INTEGER NOT NULL,
       deleted INTEGER NOT NULL,
       status TEXT NOT NULL,
       resting_status TEXT NOT NULL,
       active_runs TEXT NOT NULL,
       created_at TEXT NOT NULL,
       updated_at TEXT NOT NULL,
       state_updated_at TEXT NOT NULL,
       metadata TEXT NOT NULL,
       config TEXT NOT NULL,
       "values" TEXT,
       interrupts TEXT NOT NULL,
       error TEXT,
       expires_at TEXT,
       purged INTEGER NOT NULL DEFAULT 0
     )`,
    // The TTL sweeper's question: which thread not purged yet (live or deleted) expires next?
    "CREATE INDEX threads_expiry ON threads (expires_at) WHERE purged = 0 AND expires_at IS NOT NULL",
    // Sort orders and the status filter over live threads only (tombstones are never listed).
    "CREATE INDEX threads_created ON threads (created_at) WHERE deleted = 0",
    "CREATE INDEX threads_updated ON threads (updated_at) WHERE deleted = 0",
    "CREATE INDEX threads_state_updated ON threads (state_updated_at) WHERE deleted = 0",
    "CREATE INDEX threads_status ON threads (status, created_at) WHERE deleted = 0",
    // The run worker's start-up question: which threads have runs waiting? Only those rows are indexed.
    "CREATE INDEX threads_with_active_runs ON threads (thread_id) WHERE active_runs <> '[]'",
    // Index rows carry the thread's created_at: a metadata search in the default order reads only its page's threads.
    ...metadataIndexDdl("threads", "created_at"),
  ],
  streamPrefixes: [THREAD_STREAM_PREFIX],
  eventTypes: Object.keys(threadEventSchemas),
  prepare(db) {
    const load = loader(db);
    const rows = new ChangedColumnsWriter<ThreadState>(db, "threads", "thread_id", THREAD_COLUMNS);
    const index = prepareMetadataIndex(db, "threads", "created_at");
    const write = (id: string, before: ThreadState | undefined, after: ThreadState | undefined) => {
      if (!after) return;
      rows.write(id, before, after);
      const metadata = after.thread.metadata;
      // The same object unless a fold replaced it: only then is it compared as JSON.
      const metadataChanged =
        before !== undefined && before.thread.metadata !== metadata && JSON.stringify(before.thread.metadata) !== JSON.stringify(metadata);
      const createdChanged = before !== undefined && before.thread.created_at !== after.thread.created_at;
      if (!before || before.deleted !== after.deleted || metadataChanged || createdChanged)
        index.replace(id, after.deleted ? undefined : metadata, !before, after.thread.created_at);
    };
    const entities = new BatchedEntities<ThreadState>(load, write);
    return {
      // A thread stream's first event creates the thread.
      apply: (event: RecordedEvent) =>
        entities.update(event.streamId.slice(THREAD_STREAM_PREFIX.length), (state) => threadsProjection.evolve(state, event), event.revision === 0n),
      flush: () => entities.flush(),
    };
  },
};

interface ThreadRow {
  thread_id: string;
  revision: number | bigint;
  deleted: number;
  status: ThreadStatus;
  resting_status: ThreadState["restingStatus"];
  active_runs: string;
  created_at: string;
  updated_at: string;
  state_updated_at: string;
  metadata: string;
  config: string;
  values: string | null;
  interrupts: string;
  error: string | null;
  expires_at: string | null;
  purged: number;
}

function threadOf(r: ThreadRow): Thread {
  const thread: Thread = {
    thread_id: r.thread_id,
    created_at: r.created_at,
    updated_at: r.updated_at,
    state_updated_at: r.state_updated_at,
    metadata: JSON.parse(r.metadata),
    status: r.status,
    config: JSON.parse(r.config),
    values: r.values === null ? null : JSON.parse(r.values),
    interrupts: JSON.parse(r.interrupts),
  };
  if (r.error !== null) thread.error = JSON.parse(r.error);
  return thread;
}

function stateOf(r: ThreadRow): ThreadState {
  const state: ThreadState = {
    revision: BigInt(r.revision),
    deleted: r.deleted === 1,
    activeRuns: JSON.parse(r.active_runs),
    restingStatus: r.resting_status,
    thread: threadOf(r),
  };
  if (r.expires_at !== null) state.expiresAt = r.expires_at;
  if (r.purged === 1) state.purged = true;
  return state;
}

function loader(db: Database.Database): (id: string) => ThreadState | undefined {
  const row = db.prepare(`SELECT ${COLUMNS} FROM threads WHERE thread_id = ?`);
  return (id) => {
    const r = row.get(id) as ThreadRow | undefined;
    return r && stateOf(r);
  };
}

export type ThreadSortField = "thread_id" | "status" | "created_at" | "updated_at" | "state_updated_at";

export interface ThreadFilter {
  metadata?: JsonObject;
  values?: JsonObject;
  status?: ThreadStatus;
  ids?: string[];
  /** Extra conditions (e.g. the custom-auth filters) over the `metadata` column. */
  extra?: readonly SqlFragment[];
}

/** Queries of the threads read model. */
export class ThreadsReadModel {
  /** The folded state, tombstones included (undefined: never created). */
  readonly load: (id: string) => ThreadState | undefined;
  private readonly cache: StatementCache;
  private readonly withActiveRuns: Database.Statement;
  private readonly firstExpiry: Database.Statement;
  private readonly expired: Database.Statement;
  private readonly activeRunsOf: Database.Statement;
  private readonly ownedOrDeletedStmt: Database.Statement;

  constructor(db: Database.Database) {
    this.load = loader(db);
    // Only the queue column, not the whole row: the run worker asks this on every wake-up of a thread, and
    // it needs none of the row's metadata, config and values (a long conversation's state) parsed.
    this.activeRunsOf = db.prepare("SELECT active_runs FROM threads WHERE thread_id = ? AND deleted = 0").pluck();
    this.cache = new StatementCache(db);
    this.withActiveRuns = db.prepare("SELECT thread_id FROM threads WHERE active_runs <> '[]' AND deleted = 0").pluck();
    this.firstExpiry = db.prepare("SELECT min(expires_at) FROM threads WHERE purged = 0 AND expires_at IS NOT NULL").pluck();
    this.ownedOrDeletedStmt = db
      .prepare(
        "SELECT thread_id FROM threads WHERE purged = 0 AND (deleted = 1 OR (json_type(metadata, '$.owner') = 'text' AND json_extract(metadata, '$.owner') = ?)) ORDER BY thread_id",
      )
      .pluck();
    this.expired = db
      .prepare("SELECT thread_id FROM threads WHERE purged = 0 AND expires_at IS NOT NULL AND expires_at <= ? ORDER BY expires_at LIMIT 100")
      .pluck();
  }

  /** The live thread's first pending or running run (the head of its queue); undefined for none, or no live thread. */
  headRun(id: string): string | undefined {
    const queue = this.activeRunsOf.get(id) as string | undefined;
    return queue === undefined || queue === "[]" ? undefined : (JSON.parse(queue) as string[])[0];
  }

  /** When the next thread not purged yet (live or deleted) expires (its TTL), if any: one step of the expiry index. */
  nextExpiry(): string | undefined {
    return (this.firstExpiry.get() as string | null) ?? undefined;
  }

  /** Threads not purged yet (live or deleted) whose TTL ran out at `now` (ISO 8601), oldest first, at most 100. */
  expiredAt(now: string): string[] {
    return this.expired.all(now) as string[];
  }

  search(q: ThreadFilter & { sort_by?: ThreadSortField; sort_order?: SortOrder; limit: number; offset: number }): { page: Thread[]; total: number } {
    const source = sourceOf(q);
    const sortBy = q.sort_by ?? "created_at";
    // Driven from the metadata index, created_at order is the index's own (its rows carry it, the
    // id breaks ties as thread_id does): the query stops once it has the page, instead of sorting
    // every matching thread.
    const inIndexOrder = source.driven && sortBy === "created_at";
    const { rows, total } = pageAndCount(
      this.cache,
      source.from,
      QUALIFIED,
      inIndexOrder ? "driver.id" : "threads.thread_id",
      {
        where: source.where,
        sortColumn: inIndexOrder ? "driver.created_at" : `threads.${sortBy}`,
        sortOrder: q.sort_order ?? "desc",
        limit: q.limit,
        offset: q.offset,
      },
      source.counted,
    );
    return { page: (rows as ThreadRow[]).map(threadOf), total };
  }

  count(q: ThreadFilter): number {
    const source = sourceOf(q).counted;
    return countWhere(this.cache, source.from, source.where);
  }

  /**
   * Threads that may be `owner`'s (a user's erasure): live ones whose metadata names them as `owner`,
   * and every deleted one not purged yet, whose metadata this table no longer holds (the log does).
   */
  ownedOrDeleted(owner: string): string[] {
    return this.ownedOrDeletedStmt.all(owner) as string[];
  }

  /** Threads that have pending or running runs (what the run worker looks at when it starts). */
  idsWithActiveRuns(): string[] {
    return this.withActiveRuns.all() as string[];
  }
}

interface ThreadSource extends FilteredSource {
  /** Whether the metadata index drives the query (alias `driver`). */
  driven: boolean;
  /** What a count of these threads reads. */
  counted: FilteredSource;
}

function sourceOf(q: ThreadFilter): ThreadSource {
  const source = metadataSource("threads", "thread_id", "metadata", q.metadata);
  const where: SqlFragment[] = [{ sql: "threads.deleted = 0", params: [] }, ...source.where];
  if (q.ids !== undefined) where.push({ sql: `threads.thread_id IN (SELECT value FROM json_each(?))`, params: [JSON.stringify(q.ids)] });
  if (q.status !== undefined) where.push({ sql: "threads.status = ?", params: [q.status] });
  if (q.values !== undefined) where.push(containsSql('threads."values"', q.values));
  if (q.extra) where.push(...q.extra);
  // The index holds live threads only: when every condition but `deleted = 0` is one of the index's
  // own (the metadata's scalar entries), a count reads the index alone, no thread row.
  const index = source.index;
  const counted = index !== undefined && where.length === 1 + index.where.length ? index : { from: source.from, where };
  return { from: source.from, where, driven: index !== undefined, counted };
}
