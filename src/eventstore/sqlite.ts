import path from "node:path";
import type Database from "better-sqlite3";
import { v7 as uuidv7 } from "uuid";
import {
  allSubscriptionStart,
  checkAppend,
  readAllArguments,
  readStreamArguments,
  streamSubscriptionStart,
  type CheckedEvent,
} from "./arguments.js";
import { GroupCommit, type Outcome } from "./sqlite-group-commit.js";
import { openDatabase, type Synchronous } from "./sqlite-schema.js";
import { CatchUpSubscription, CommitHub, type CatchUpSource } from "./sqlite-subscription.js";
import {
  AppendTooLargeError,
  MAX_APPEND_SIZE,
  StoreUnavailableError,
  WrongExpectedVersionError,
  eventSize,
  type AllSubscriptionOptions,
  type AppendResult,
  type EventData,
  type EventFilter,
  type EventStore,
  type ExpectedRevision,
  type ReadAllOptions,
  type ReadStreamOptions,
  type RecordedEvent,
  type StreamSubscriptionOptions,
  type Subscription,
} from "./types.js";

export interface SqliteStoreOptions {
  /** The database file; its directory is created when missing. */
  path: string;
  /** FULL (default) fsyncs every commit: an acknowledged append survives power loss. NORMAL survives process crashes only. */
  synchronous?: Synchronous;
}

/** Counters of the group commit, for metrics and tests. */
export interface SqliteStoreStats {
  /** Committed write transactions. */
  transactions: number;
  /** Append calls that succeeded (idempotent retries included). */
  appends: number;
  /** Events written. */
  events: number;
  /** Subscriptions currently open (listening for commits). */
  subscriptions: number;
}

export interface SqliteEventStore extends EventStore {
  readonly kind: "sqlite";
  stats(): SqliteStoreStats;
}

/** Opens the embedded event store. Rejects with StoreUnavailableError when the file is locked, unreadable or not an event store. */
export async function openSqliteStore(options: SqliteStoreOptions): Promise<SqliteEventStore> {
  if (typeof options?.path !== "string" || options.path === "") throw new TypeError("openSqliteStore: path is required");
  const synchronous = options.synchronous ?? "FULL";
  if (synchronous !== "FULL" && synchronous !== "NORMAL") {
    throw new TypeError(`openSqliteStore: synchronous must be FULL or NORMAL, got ${String(synchronous)}`);
  }
  const file = path.resolve(options.path);
  return new SqliteStore(openDatabase(file, synchronous), file);
}

/** Rows are read as arrays (`raw()`), in this column order. */
type Row = [
  position: bigint,
  streamId: string,
  revision: bigint,
  eventId: string,
  type: string,
  data: string,
  metadata: string | null,
  created: bigint,
];
const COLUMNS = "position, stream_id, revision, event_id, type, data, metadata, created";

/** Rows per read for catch-up and filtered reads. */
const PAGE_SIZE = 1000;
/** Bounds one group-commit transaction (and so how long it holds the event loop). */
const MAX_EVENTS_PER_TRANSACTION = 10_000;
const MAX_INT64 = 2n ** 63n - 1n;

interface PreparedEvent {
  id: string;
  type: string;
  data: string;
  metadata: string | null;
}

interface AppendJob {
  stream: string;
  expected: ExpectedRevision;
  events: PreparedEvent[];
  /** The first event came with its own id, so the append may be a retry. */
  mayBeRetry: boolean;
}

function prepareStatements(db: Database.Database) {
  const raw = (sql: string) => db.prepare(sql).raw();
  return {
    streamRevision: db.prepare("SELECT revision FROM streams WHERE stream_id = ?").pluck(),
    head: db.prepare("SELECT max(position) FROM events").pluck(),
    insert: db.prepare(
      "INSERT INTO events (stream_id, revision, event_id, type, data, metadata, created) VALUES (?, ?, ?, ?, ?, ?, ?)",
    ),
    upsertStream: db.prepare(
      "INSERT INTO streams (stream_id, revision) VALUES (?, ?) ON CONFLICT (stream_id) DO UPDATE SET revision = excluded.revision",
    ),
    eventById: raw("SELECT stream_id, revision FROM events WHERE event_id = ?"),
    idsFrom: raw("SELECT event_id, position FROM events WHERE stream_id = ? AND revision >= ? ORDER BY revision LIMIT ?"),
    streamForwards: raw(`SELECT ${COLUMNS} FROM events WHERE stream_id = ? AND revision >= ? ORDER BY revision LIMIT ?`),
    streamBackwards: raw(
      `SELECT ${COLUMNS} FROM events WHERE stream_id = ? AND revision <= ? ORDER BY revision DESC LIMIT ?`,
    ),
    allForwards: raw(`SELECT ${COLUMNS} FROM events WHERE position >= ? ORDER BY position LIMIT ?`),
  };
}

class SqliteStore implements SqliteEventStore {
  readonly kind = "sqlite" as const;
  private closed = false;
  private readonly sql: ReturnType<typeof prepareStatements>;
  private readonly hub = new CommitHub();
  private readonly counters = { transactions: 0, appends: 0, events: 0 };
  private readonly queue: GroupCommit<AppendJob, AppendResult>;

  constructor(
    private readonly db: Database.Database,
    private readonly file: string,
  ) {
    this.sql = prepareStatements(db);
    // Nested transaction functions run as savepoints: an append that fails is undone alone.
    const appendOne = db.transaction((job: AppendJob, created: number) => this.write(job, created));
    const appendBatch = db.transaction((jobs: AppendJob[]): Outcome<AppendResult>[] => {
      const created = Date.now();
      return jobs.map((job) => {
        try {
          return { ok: true, value: appendOne(job, created) };
        } catch (error) {
          return { ok: false, error };
        }
      });
    });
    this.queue = new GroupCommit(
      (jobs) => {
        const outcomes = appendBatch.immediate(jobs); // BEGIN IMMEDIATE … COMMIT: durable once it returns
        this.afterCommit(jobs, outcomes);
        return outcomes;
      },
      (job) => Math.max(1, job.events.length),
      MAX_EVENTS_PER_TRANSACTION,
    );
  }

  stats(): SqliteStoreStats {
    return { ...this.counters, subscriptions: this.hub.size };
  }

  async append(stream: string, events: EventData[], expected: ExpectedRevision = "any"): Promise<AppendResult> {
    // Generated ids are time-ordered (UUIDv7): the unique index on event_id then grows at its right edge. Random (v4)
    // ids scatter each commit over many index pages, which halves the throughput of large batches with synchronous=FULL.
    const prepared = checkAppend(stream, events, expected, { newId: uuidv7 }, toStored);
    // EventStoreDB's limit, so that both stores accept the same appends.
    const size = prepared.reduce((sum, e) => sum + eventSize(e.type, e.data, e.metadata), 0);
    if (size > MAX_APPEND_SIZE) throw new AppendTooLargeError(stream, MAX_APPEND_SIZE, size);
    this.ensureOpen();
    return this.queue.submit({ stream, expected, events: prepared, mayBeRetry: events[0]?.id !== undefined });
  }

  async readStream(stream: string, options: ReadStreamOptions = {}): Promise<RecordedEvent[]> {
    const { direction, maxCount, from } = readStreamArguments(stream, options);
    const limit = maxCount ?? -1; // as a SQL LIMIT: -1 = no limit
    this.ensureOpen();
    let rows: Row[];
    if (direction === "forwards") {
      if (from === "end") return [];
      rows = this.sql.streamForwards.all(stream, from === "start" ? 0n : from, limit) as Row[];
    } else {
      const start = from === "start" ? 0n : from === "end" ? MAX_INT64 : min(from, MAX_INT64);
      rows = this.sql.streamBackwards.all(stream, start, limit) as Row[];
    }
    return rows.map(toRecorded);
  }

  async readAll(options: ReadAllOptions = {}): Promise<RecordedEvent[]> {
    const { from, maxCount } = readAllArguments(options);
    const limit = maxCount ?? -1; // as a SQL LIMIT: -1 = no limit
    this.ensureOpen();
    let position = from === "start" ? 0n : min(from, MAX_INT64);
    const filter = options.filter;
    if (!filter) return (this.sql.allForwards.all(position, limit) as Row[]).map(toRecorded);
    const wanted = limit < 0 ? Infinity : limit;
    const out: RecordedEvent[] = [];
    while (out.length < wanted) {
      const rows = this.sql.allForwards.all(position, PAGE_SIZE) as Row[];
      for (const row of rows) {
        if (out.length < wanted && rowMatches(row, filter)) out.push(toRecorded(row));
      }
      if (rows.length < PAGE_SIZE) break;
      position = rows[rows.length - 1][0] + 1n;
    }
    return out;
  }

  async headPosition(): Promise<bigint> {
    this.ensureOpen();
    return this.head();
  }

  subscribeToStream(stream: string, options: StreamSubscriptionOptions = {}): Subscription {
    const from = streamSubscriptionStart(stream, options);
    this.ensureOpen();
    const start =
      from === "start" ? -1n : from === "end" ? ((this.sql.streamRevision.get(stream) as bigint | undefined) ?? -1n) : min(from, MAX_INT64 - 1n);
    const query = this.sql.streamForwards;
    const source: CatchUpSource = {
      readAfter(cursor) {
        const rows = query.all(stream, cursor + 1n, PAGE_SIZE) as Row[];
        const last = rows[rows.length - 1];
        return { events: rows.map(toRecorded), cursor: last?.[2], atHead: rows.length < PAGE_SIZE };
      },
      concerns: (touched) => touched.has(stream),
    };
    return new CatchUpSubscription(source, start, this.hub);
  }

  subscribeToAll(options: AllSubscriptionOptions = {}): Subscription {
    const from = allSubscriptionStart(options);
    this.ensureOpen();
    const start = from === "start" ? -1n : from === "end" ? this.head() : min(from, MAX_INT64 - 1n);
    const filter = options.filter;
    const prefixes = filter?.streamPrefixes;
    const query = this.sql.allForwards;
    const source: CatchUpSource = {
      readAfter(cursor) {
        const rows = query.all(cursor + 1n, PAGE_SIZE) as Row[];
        const last = rows[rows.length - 1];
        const events = filter ? rows.filter((row) => rowMatches(row, filter)).map(toRecorded) : rows.map(toRecorded);
        return { events, cursor: last?.[0], atHead: rows.length < PAGE_SIZE };
      },
      concerns: prefixes
        ? (touched) => {
            for (const stream of touched) if (prefixes.some((p) => stream.startsWith(p))) return true;
            return false;
          }
        : () => true,
    };
    return new CatchUpSubscription(source, start, this.hub);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.queue.flushAll(); // queued appends commit (and their promises resolve) before the database closes
    this.hub.closeAll();
    this.db.close();
  }

  private ensureOpen(): void {
    if (this.closed) throw new StoreUnavailableError(`event store ${this.file} is closed`);
  }

  private head(): bigint {
    return (this.sql.head.get() as bigint | null) ?? -1n;
  }

  /** One append inside the batch transaction; throws to undo just this append. */
  private write(job: AppendJob, created: number): AppendResult {
    const { stream, expected, events } = job;
    const current = this.sql.streamRevision.get(stream) as bigint | undefined;
    const conflict = () => new WrongExpectedVersionError(stream, expected, current ?? "no_stream");
    if (job.mayBeRetry) {
      const original = this.findOriginal(job);
      if (original === "partial") throw conflict();
      if (original) return original;
    }
    if (!satisfies(expected, current)) throw conflict();
    if (events.length === 0) return { nextExpectedRevision: current ?? -1n, position: this.head() };
    let revision = current ?? -1n;
    let position = -1n;
    try {
      for (const e of events) {
        revision++;
        position = this.sql.insert.run(stream, revision, e.id, e.type, e.data, e.metadata, created).lastInsertRowid as bigint;
      }
    } catch (error) {
      // Some of the ids exist already (the first one did not): ESDB answers a partial duplicate with a conflict.
      if (isDuplicateEventId(error)) throw conflict();
      throw error;
    }
    this.sql.upsertStream.run(stream, revision);
    return { nextExpectedRevision: revision, position };
  }

  /**
   * Idempotency by event id, as EventStoreDB does: when the first id is already in the log, the append is a retry.
   * If all its ids follow one another in this stream, the original result is returned; otherwise it is a conflict.
   */
  private findOriginal(job: AppendJob): AppendResult | "partial" | undefined {
    const first = this.sql.eventById.get(job.events[0].id) as [string, bigint] | undefined;
    if (!first) return undefined;
    const [streamId, revision] = first;
    if (streamId !== job.stream) return "partial";
    const n = job.events.length;
    const rows = this.sql.idsFrom.all(job.stream, revision, n) as [string, bigint][];
    if (rows.length !== n || rows.some((row, i) => row[0] !== job.events[i].id)) return "partial";
    return { nextExpectedRevision: revision + BigInt(n - 1), position: rows[n - 1][1] };
  }

  private afterCommit(jobs: AppendJob[], outcomes: Outcome<AppendResult>[]): void {
    this.counters.transactions++;
    const touched = new Set<string>();
    jobs.forEach((job, i) => {
      if (!outcomes[i].ok) return;
      this.counters.appends++;
      this.counters.events += job.events.length;
      if (job.events.length > 0) touched.add(job.stream);
    });
    if (touched.size > 0) this.hub.notify(touched);
  }
}

function satisfies(expected: ExpectedRevision, current: bigint | undefined): boolean {
  switch (expected) {
    case "any":
      return true;
    case "no_stream":
      return current === undefined;
    case "stream_exists":
      return current !== undefined;
    default:
      return current === expected;
  }
}

/** A checked event as the events table stores it: JSON text, metadata NULL when there is none. */
function toStored(event: CheckedEvent): PreparedEvent {
  const metadata = event.metadata === undefined ? null : JSON.stringify(event.metadata);
  return { id: event.id, type: event.type, data: event.json, metadata };
}

function toRecorded(row: Row): RecordedEvent {
  return {
    streamId: row[1],
    id: row[3],
    type: row[4],
    revision: row[2],
    position: row[0],
    data: JSON.parse(row[5]),
    metadata: row[6] === null ? {} : JSON.parse(row[6]),
    created: new Date(Number(row[7])),
  };
}

/** Filters on the raw row, so that events filtered out are never parsed. */
function rowMatches(row: Row, filter: EventFilter): boolean {
  if (filter.streamPrefixes && !filter.streamPrefixes.some((p) => row[1].startsWith(p))) return false;
  if (filter.eventTypes && !filter.eventTypes.includes(row[4])) return false;
  return true;
}

function isDuplicateEventId(error: unknown): boolean {
  const e = error as { code?: unknown; message?: unknown } | null;
  return e?.code === "SQLITE_CONSTRAINT_UNIQUE" && String(e.message).includes("events.event_id");
}

function min(a: bigint, b: bigint): bigint {
  return a < b ? a : b;
}
