import path from "node:path";
import type Database from "better-sqlite3";
import { v7 as uuidv7 } from "uuid";
import { GroupCommit, type Outcome } from "./sqlite-group-commit.js";
import { openDatabase, type Synchronous } from "./sqlite-schema.js";
import { CatchUpSubscription, CommitHub, type CatchUpSource } from "./sqlite-subscription.js";
import {
  StoreUnavailableError,
  WrongExpectedVersionError,
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
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

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
    checkStream(stream);
    checkExpected(expected);
    if (!Array.isArray(events)) throw new TypeError("append: events must be an array");
    const prepared = events.map(prepareEvent);
    if (new Set(prepared.map((e) => e.id)).size !== prepared.length) {
      throw new TypeError("append: the same event id appears twice in one append");
    }
    this.ensureOpen();
    return this.queue.submit({ stream, expected, events: prepared, mayBeRetry: events[0]?.id !== undefined });
  }

  async readStream(stream: string, options: ReadStreamOptions = {}): Promise<RecordedEvent[]> {
    checkStream(stream);
    const direction = options.direction ?? "forwards";
    if (direction !== "forwards" && direction !== "backwards") throw new TypeError(`readStream: bad direction ${String(direction)}`);
    const limit = checkMaxCount(options.maxCount);
    const from = options.fromRevision ?? (direction === "forwards" ? "start" : "end");
    if (typeof from === "bigint") checkNonNegative(from, "fromRevision");
    else if (from !== "start" && from !== "end") throw new TypeError(`readStream: bad fromRevision ${String(from)}`);
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
    const from = options.fromPosition ?? "start";
    if (typeof from === "bigint") checkNonNegative(from, "fromPosition");
    else if (from !== "start") throw new TypeError(`readAll: bad fromPosition ${String(from)}`);
    const limit = checkMaxCount(options.maxCount);
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
    checkStream(stream);
    const from = options.fromRevision ?? "start";
    if (typeof from === "bigint") checkNonNegative(from, "fromRevision");
    else if (from !== "start" && from !== "end") throw new TypeError(`subscribeToStream: bad fromRevision ${String(from)}`);
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
    const from = options.fromPosition ?? "start";
    if (typeof from === "bigint") checkNonNegative(from, "fromPosition");
    else if (from !== "start" && from !== "end") throw new TypeError(`subscribeToAll: bad fromPosition ${String(from)}`);
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

function prepareEvent(event: EventData, index: number): PreparedEvent {
  if (typeof event !== "object" || event === null) throw new TypeError(`append: event #${index} is not an object`);
  if (typeof event.type !== "string" || event.type === "") throw new TypeError(`append: event #${index} has no type`);
  let id: string;
  // Generated ids are time-ordered (UUIDv7): the unique index on event_id then grows at its right edge. Random (v4)
  // ids scatter each commit over many index pages, which halves the throughput of large batches with synchronous=FULL.
  if (event.id === undefined) id = uuidv7();
  else if (typeof event.id === "string" && UUID.test(event.id)) id = event.id.toLowerCase();
  else throw new TypeError(`append: event #${index} id must be a UUID, got ${String(event.id)}`);
  const data = JSON.stringify(event.data);
  if (data === undefined) throw new TypeError(`append: event #${index} data is not JSON-serialisable`);
  const meta = event.metadata;
  if (meta !== undefined && (typeof meta !== "object" || meta === null || Array.isArray(meta))) {
    throw new TypeError(`append: event #${index} metadata must be an object`);
  }
  const metadata = meta === undefined || Object.keys(meta).length === 0 ? null : JSON.stringify(meta);
  return { id, type: event.type, data, metadata };
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

function checkStream(stream: unknown): asserts stream is string {
  if (typeof stream !== "string" || stream === "") throw new TypeError("stream name must be a non-empty string");
}

function checkExpected(expected: unknown): void {
  if (expected === "any" || expected === "no_stream" || expected === "stream_exists") return;
  if (typeof expected === "bigint" && expected >= 0n) return;
  throw new TypeError(`append: bad expected revision ${String(expected)}`);
}

function checkNonNegative(value: bigint, name: string): void {
  if (value < 0n) throw new TypeError(`${name} must not be negative, got ${value}`);
}

/** maxCount as a SQL LIMIT: -1 = no limit. */
function checkMaxCount(maxCount: number | undefined): number {
  if (maxCount === undefined || maxCount === Infinity) return -1;
  if (!Number.isSafeInteger(maxCount) || maxCount < 0) throw new TypeError(`maxCount must be a non-negative integer, got ${maxCount}`);
  return maxCount;
}

function min(a: bigint, b: bigint): bigint {
  return a < b ? a : b;
}
