import path from "node:path";
import type Database from "better-sqlite3";
import { newTimeOrderedId } from "../util/new-id.js";
import { allSubscriptionStart, checkAppend, readAllArguments, readStreamArguments, streamSubscriptionStart, type CheckedEvent } from "./arguments.js";
import { GroupCommit, type Outcome } from "./sqlite-group-commit.js";
import { WalDurability } from "./sqlite-durability.js";
import { eraseForGood } from "./sqlite-erase.js";
import { openDatabase, openDatabaseReadOnly, type Synchronous } from "./sqlite-schema.js";
import { CommittedEvent, RecentEvents } from "./sqlite-recent.js";
import { COLUMNS, toRecorded, type Row } from "./sqlite-rows.js";
import { CatchUpSubscription, CommitHub, type CatchUpSource, type Page } from "./sqlite-subscription.js";
import { SUBSCRIPTION_BUFFER } from "./subscription-buffers.js";
import {
  AppendTooLargeError,
  type AppendTicket,
  MAX_APPEND_SIZE,
  StoreUnavailableError,
  WrongExpectedVersionError,
  eventSize,
  type AllSubscriptionOptions,
  type AppendOptions,
  type AppendResult,
  type EventData,
  type EventFilter,
  type EventStore,
  type ExpectedRevision,
  matchesFilter,
  type ReadAllOptions,
  type ReadStreamOptions,
  type RecordedEvent,
  type StreamSubscriptionOptions,
  type Subscription,
  PURGED_EVENT_TYPE,
} from "./types.js";
import { tracePoint } from "../util/trace-points.js";

export interface SqliteStoreOptions {
  /** The database file; its directory is created when missing. */
  path: string;
  /**
   * FULL (default): what leaves the process (responses, subscriptions) survives power loss; the WAL is fsynced after
   * commits, off the event loop (see WalDurability). NORMAL: commits survive process crashes only.
   */
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
  /** Recently committed events held in memory (reads of them need no query and share one parse). */
  recentEvents: number;
  /** Last position committed (readable in this process). */
  committedPosition: bigint;
  /** Last position that survives power loss: subscriptions deliver up to here. */
  durablePosition: bigint;
  /** WAL syncs completed (none with synchronous NORMAL), and their total seconds from start to report. */
  walSyncs: number;
  walSyncSeconds: number;
}

export interface SqliteEventStore extends EventStore {
  readonly kind: "sqlite";
  stats(): SqliteStoreStats;
  syncStats(): { count: number; seconds: number };
}

/** Opens the embedded event store. Rejects with StoreUnavailableError when the file is locked, unreadable or not an event store. */
export async function openSqliteStore(options: SqliteStoreOptions): Promise<SqliteEventStore> {
  if (typeof options?.path !== "string" || options.path === "") throw new TypeError("openSqliteStore: path is required");
  const synchronous = options.synchronous ?? "FULL";
  if (synchronous !== "FULL" && synchronous !== "NORMAL") {
    throw new TypeError(`openSqliteStore: synchronous must be FULL or NORMAL, got ${String(synchronous)}`);
  }
  const file = path.resolve(options.path);
  // The connection never fsyncs on commit: WalDurability does it, grouped and off the event loop.
  return new SqliteStore(openDatabase(file, "NORMAL"), file, synchronous === "FULL" ? "fsync" : "at-commit");
}

/** Opens an existing event store for reading only (appends fail); see openDatabaseReadOnly. */
export function openSqliteStoreReadOnly(file: string): SqliteEventStore {
  const absolute = path.resolve(file);
  return new SqliteStore(openDatabaseReadOnly(absolute), absolute, "at-commit");
}

/** Rows per read for catch-up and filtered reads; a page also stops at SUBSCRIPTION_BUFFER.maxBytes of the events it keeps. */
const PAGE_SIZE = SUBSCRIPTION_BUFFER.maxEvents;
/**
 * Recently committed events kept in memory: enough for live subscribers and for reads of the streams of the
 * runs in flight (a run writes a handful of events), few enough that most die young: events held much longer outlive V8's
 * young generation and make every major GC dearer.
 */
const RECENT_LIMITS = { maxEvents: 512, maxBytes: 2 * 2 ** 20 };
/** Bounds one group-commit transaction (and so how long it holds the event loop). */
const MAX_EVENTS_PER_TRANSACTION = 10_000;
const MAX_INT64 = 2n ** 63n - 1n;

interface PreparedEvent {
  id: string;
  type: string;
  /** The text the row stores. */
  data: string;
  /** The data's text as readers of the recent events get it: `data` unless the append gave a stored form. */
  held: string;
  metadata: string | null;
}

interface AppendJob {
  stream: string;
  expected: ExpectedRevision;
  events: PreparedEvent[];
  /** The first event came with its own id, so the append may be a retry. */
  mayBeRetry: boolean;
  /**
   * Some event came with its own id, which may already be in the log: an insert can then fail
   * halfway, and the append runs in a savepoint of its own. Generated ids (UUIDv7) are new.
   */
  givenIds: boolean;
  /** Filled by the write: the events it inserted, handed to the recent events once committed. */
  inserted?: CommittedEvent[];
  /** Settled with this append's outcome (see AppendOptions.ticket). */
  ticket?: AppendTicket;
  /** Appends this one depends on (see AppendOptions.after). */
  after?: readonly AppendTicket[];
}

/**
 * Every query is prepared once. None binds its LIMIT: SQLite (3.4x, STAT4) lets the planner look at a bound LIMIT,
 * so binding it expires the statement and every execution prepares it again. Pages use a
 * literal LIMIT; reads with a caller's maxCount stop iterating instead.
 */
function prepareStatements(db: Database.Database) {
  const raw = (sql: string) => db.prepare(sql).raw();
  return {
    /** The stream's last revision, from the end of its range in the (stream_id, revision) index. */
    streamRevision: db.prepare("SELECT revision FROM events WHERE stream_id = ? ORDER BY revision DESC LIMIT 1").pluck(),
    head: db.prepare("SELECT max(position) FROM events").pluck(),
    insert: db.prepare("INSERT INTO events (stream_id, revision, event_id, type, data, metadata, created) VALUES (?, ?, ?, ?, ?, ?, ?)"),
    eventById: raw("SELECT stream_id, revision FROM events WHERE event_id = ?"),
    idsFrom: raw("SELECT event_id, position FROM events WHERE stream_id = ? AND revision >= ? ORDER BY revision"),
    streamForwards: raw(`SELECT ${COLUMNS} FROM events WHERE stream_id = ? AND revision >= ? ORDER BY revision`),
    streamPage: raw(`SELECT ${COLUMNS} FROM events WHERE stream_id = ? AND revision >= ? ORDER BY revision LIMIT ${PAGE_SIZE}`),
    streamBackwards: raw(`SELECT ${COLUMNS} FROM events WHERE stream_id = ? AND revision <= ? ORDER BY revision DESC`),
    allPage: raw(`SELECT ${COLUMNS} FROM events WHERE position >= ? ORDER BY position LIMIT ${PAGE_SIZE}`),
    /** One event type after a position: a range of the (type, position) index, then only those rows. */
    typePage: raw(`SELECT ${COLUMNS} FROM events WHERE type = ? AND position >= ? ORDER BY position LIMIT ${PAGE_SIZE}`),
    /** Position of the page's last event of one type, if it has a full page: read from the index alone. */
    typePageEnd: db
      .prepare(`SELECT position FROM events WHERE type = ? AND position >= ? ORDER BY position LIMIT 1 OFFSET ${PAGE_SIZE - 1}`)
      .pluck()
      .safeIntegers(true),
    /** The events of one type in a range of positions (at most a page: the range ends at a page end). */
    typeRange: raw(`SELECT ${COLUMNS} FROM events WHERE type = ? AND position >= ? AND position <= ? ORDER BY position`),
    /** A purge keeps each event's place and attribution; its type and data become a tombstone. */
    purge: db.prepare(
      `UPDATE events SET type = '${PURGED_EVENT_TYPE}', data = json_object('purged_type', type) WHERE stream_id = ? AND type <> '${PURGED_EVENT_TYPE}'`,
    ),
  };
}

/** The first `max` rows of a query (all when max is undefined), without a bound LIMIT. */
function take<R>(statement: Database.Statement, args: unknown[], max: number | undefined): R[] {
  if (max === undefined) return statement.all(...args) as R[];
  const rows: R[] = [];
  if (max === 0) return rows;
  for (const row of statement.iterate(...args) as IterableIterator<R>) {
    rows.push(row);
    if (rows.length >= max) break; // ends the iteration: the statement is reset
  }
  return rows;
}

class SqliteStore implements SqliteEventStore {
  readonly kind = "sqlite" as const;
  private closed = false;
  private readonly sql: ReturnType<typeof prepareStatements>;
  private readonly hub = new CommitHub();
  private readonly counters = { transactions: 0, appends: 0, events: 0 };
  private readonly queue: GroupCommit<AppendJob, AppendResult>;
  private recent: RecentEvents;
  private readonly durability: WalDurability;
  /** Streams touched by commits not yet durable, by the commit's last position: subscribers hear of them once durable. */
  private undelivered: { position: bigint; touched: Set<string> }[] = [];
  /** The last revision of each stream written in the batch transaction under way (not committed, so not in `recent` yet). */
  private readonly batchHeads = new Map<string, bigint>();
  private failure: Error | undefined;

  constructor(
    private readonly db: Database.Database,
    private readonly file: string,
    durability: "fsync" | "at-commit",
  ) {
    this.sql = prepareStatements(db);
    const head = this.head();
    this.recent = new RecentEvents(head, RECENT_LIMITS);
    const onDurable = (position: bigint) => this.deliverUpTo(position);
    this.durability =
      durability === "fsync"
        ? WalDurability.fsyncing(file, head, onDurable, (error) => {
            this.failure = error;
            console.error(error.message);
          })
        : WalDurability.atCommit(head, onDurable);
    // Nested transaction functions run as savepoints: an append that may fail halfway is undone alone.
    // One whose checks come before its first insert needs none (a savepoint costs as much as an insert).
    const appendOne = db.transaction((job: AppendJob, created: number) => this.write(job, created));
    const appendBatch = db.transaction((jobs: AppendJob[]): Outcome<AppendResult>[] => {
      const created = Date.now();
      this.batchHeads.clear(); // a batch that failed as a whole left its heads here
      // The tickets of this batch's appends so far: written (committed with the batch, or not at all), or refused.
      const here = new Map<AppendTicket, { ok: true } | { ok: false; error: unknown }>();
      return jobs.map((job) => {
        try {
          if (job.after) dependenciesWritten(job.after, here);
          const value = job.givenIds ? appendOne(job, created) : this.write(job, created);
          if (job.ticket) here.set(job.ticket, { ok: true });
          return { ok: true, value };
        } catch (error) {
          // Failed after an insert, outside a savepoint (an I/O error): only the whole batch can be undone.
          if (!job.givenIds && job.inserted && job.inserted.length > 0) throw error;
          if (job.ticket) here.set(job.ticket, { ok: false, error });
          return { ok: false, error };
        }
      });
    });
    this.queue = new GroupCommit(
      (jobs) => {
        let outcomes: Outcome<AppendResult>[];
        try {
          tracePoint("log.commit.start");
          outcomes = appendBatch.immediate(jobs); // BEGIN IMMEDIATE … COMMIT: visible (and crash-safe) once it returns
          tracePoint("log.commit.end");
        } catch (error) {
          for (const job of jobs) job.ticket?.failed(error);
          throw error;
        }
        this.afterCommit(jobs, outcomes);
        return outcomes;
      },
      (job) => Math.max(1, job.events.length),
      MAX_EVENTS_PER_TRANSACTION,
    );
  }

  stats(): SqliteStoreStats {
    const syncs = this.durability.syncs;
    return {
      ...this.counters,
      subscriptions: this.hub.size,
      recentEvents: this.recent.size,
      committedPosition: this.durability.committedPosition,
      durablePosition: this.durability.position,
      walSyncs: syncs.count,
      walSyncSeconds: syncs.seconds,
    };
  }

  syncStats(): { count: number; seconds: number } {
    return this.durability.syncs;
  }

  whenDurable(): Promise<void> | undefined {
    return this.durability.whenDurable();
  }

  /** Not an async function: the group commit's promise is handed back as it is (one promise fewer per append). */
  append(stream: string, events: EventData[], expected: ExpectedRevision = "any", options: AppendOptions = {}): Promise<AppendResult> {
    let prepared: PreparedEvent[];
    try {
      // Generated ids are time-ordered (UUIDv7): the unique index on event_id then grows at its right edge. Random (v4)
      // ids would scatter each commit over many index pages, each of them written (and, with synchronous=FULL, synced) per commit.
      prepared = checkAppend(stream, events, expected, { newId: newTimeOrderedId, holdsAppended: true }, toStored);
      // EventStoreDB's limit, so that both stores accept the same appends.
      const size = prepared.reduce((sum, e) => sum + eventSize(e.type, e.data, e.metadata), 0);
      if (size > MAX_APPEND_SIZE) throw new AppendTooLargeError(stream, MAX_APPEND_SIZE, size);
      this.ensureOpen();
    } catch (error) {
      options.ticket?.failed(error);
      return Promise.reject(error);
    }
    const job: AppendJob = {
      stream,
      expected,
      events: prepared,
      mayBeRetry: events[0]?.id !== undefined,
      givenIds: events.some((e) => e?.id !== undefined),
      ticket: options.ticket,
      after: options.after,
    };
    return this.queue.submit(job, options.urgent === true);
  }

  async readStream(stream: string, options: ReadStreamOptions = {}): Promise<RecordedEvent[]> {
    const { direction, maxCount, from } = readStreamArguments(stream, options);
    this.ensureOpen();
    let rows: Row[];
    if (direction === "forwards") {
      if (from === "end") return [];
      const start = from === "start" ? 0n : from;
      const recent = options.fromStorage ? undefined : this.recent.streamFrom(stream, start, maxCount ?? Infinity);
      if (recent) return recent.map(eventOf);
      rows = take<Row>(this.sql.streamForwards, [stream, start], maxCount);
    } else {
      const start = from === "start" ? 0n : from === "end" ? MAX_INT64 : min(from, MAX_INT64);
      const recent = options.fromStorage ? undefined : this.recent.streamBackwards(stream, start, maxCount ?? Infinity);
      if (recent) return recent.map(eventOf);
      rows = take<Row>(this.sql.streamBackwards, [stream, start], maxCount);
    }
    return rows.map(toRecorded);
  }

  async readAll(options: ReadAllOptions = {}): Promise<RecordedEvent[]> {
    const { from, maxCount } = readAllArguments(options);
    this.ensureOpen();
    const wanted = maxCount ?? Infinity;
    const out: RecordedEvent[] = [];
    let cursor = (from === "start" ? 0n : min(from, MAX_INT64)) - 1n; // readAfter's cursor is exclusive
    while (out.length < wanted) {
      const page = this.readAfter(cursor, options.filter);
      for (const event of page.events) if (out.length < wanted) out.push(event);
      if (page.atHead || page.cursor === undefined) break;
      cursor = page.cursor;
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
    const start = from === "start" ? -1n : from === "end" ? ((this.sql.streamRevision.get(stream) as bigint | undefined) ?? -1n) : min(from, MAX_INT64 - 1n);
    const query = this.sql.streamPage;
    // Read through `this`: a purge replaces the recent events.
    const historyReadable = this.historyReadable();
    const source: CatchUpSource = {
      historyReadable,
      // Subscribers get durable events only (see WalDurability).
      readAfter: (cursor) => {
        const limit = this.durability.position;
        const held = this.recent.streamFrom(stream, cursor + 1n, PAGE_SIZE);
        // Rows are taken one at a time: a page of large events stops at its byte bound without reading the rest.
        const { page } = held ? pageOf(held, HELD_IN_STREAM, limit) : pageOf(query.iterate(stream, cursor + 1n) as Iterable<Row>, ROW_IN_STREAM, limit);
        return page;
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
    const source: CatchUpSource = {
      historyReadable: this.historyReadable(),
      readAfter: (cursor) => this.readAfter(cursor, filter, this.durability.position),
      concerns: prefixes
        ? (touched) => {
            for (const stream of touched) if (prefixes.some((p) => stream.startsWith(p))) return true;
            return false;
          }
        : () => true,
    };
    return new CatchUpSubscription(source, start, this.hub);
  }

  /** For a subscription beginning now: whether what is committed now has become durable (its history readable). */
  private historyReadable(): () => boolean {
    const end = this.durability.committedPosition;
    return () => this.durability.position >= end;
  }

  /**
   * One page of `$all` strictly after `cursor` and at or before `limit` (when given), filtered: from the recent
   * events when they hold everything after the cursor, else from the database. Rows that the filter drops are
   * never parsed. A page cut at `limit` is at the head: what follows is not readable yet.
   */
  private readAfter(cursor: bigint, filter: EventFilter | undefined, limit?: bigint): Page {
    const held = this.recent.after(cursor, PAGE_SIZE);
    if (held) return pageOf(held, HELD_IN_ALL, limit, filter && ((e) => matchesFilter(e.streamId, e.type, filter))).page;
    if (filter?.eventTypes) return this.readTypesAfter(cursor, filter.eventTypes, filter.streamPrefixes, limit);
    const rows = this.sql.allPage.iterate(cursor + 1n) as Iterable<Row>;
    return pageOf(rows, ROW_IN_ALL, limit, filter && ((row) => matchesFilter(row[1], row[4], filter))).page;
  }

  /**
   * A page of the events of some types after `cursor`: one index range scan per type, merged by position. A type
   * whose page is full bounds what is known: the page ends at the smallest such last position, so nothing of
   * another type before it is missed; when no page is full, every matching event up to the head is in hand.
   */
  private readTypesAfter(cursor: bigint, types: string[], prefixes: string[] | undefined, limit?: bigint): Page {
    const distinct = [...new Set(types)];
    // The bound first, from the index alone: rows past it would be read (payloads and all) only to be dropped.
    let bound: bigint | undefined;
    for (const type of distinct) {
      const end = this.sql.typePageEnd.get(type, cursor + 1n) as bigint | undefined;
      if (end !== undefined && (bound === undefined || end < bound)) bound = end;
    }
    const found = distinct.flatMap(
      (type) => (bound === undefined ? this.sql.typePage.all(type, cursor + 1n) : this.sql.typeRange.all(type, cursor + 1n, bound)) as Row[],
    );
    found.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
    // Every match up to the bound is in hand, so any prefix of them is a page (cut at a page's size).
    const { page, stop } = pageOf(found, ROW_IN_ALL, limit, prefixes && ((row) => prefixes.some((p) => row[1].startsWith(p))));
    if (stop === "size") return page;
    // Cut at the readable head: every match up to the limit is in hand; the cursor stays at the last one kept.
    if (limit !== undefined && (bound === undefined || bound > limit)) return { ...page, atHead: true };
    return { ...page, cursor: bound ?? page.cursor, atHead: bound === undefined };
  }

  async purgeStreams(streams: readonly string[]): Promise<void> {
    this.ensureOpen();
    this.queue.flushAll(); // queued appends to these streams commit first, then are purged with the rest
    // The old payloads are zeroed in the pages and the WAL that still held them is cut off.
    eraseForGood(this.db, () => {
      for (const stream of streams) this.sql.purge.run(stream);
    });
    // The recent events hold the purged payloads: start over from the head (older reads go to the table).
    this.recent = new RecentEvents(this.head(), RECENT_LIMITS);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.queue.flushAll(); // queued appends commit (and their promises resolve) before the database closes
    try {
      this.durability.closeSync(); // and reach the disk
    } finally {
      this.hub.closeAll();
      this.db.close();
    }
  }

  private ensureOpen(): void {
    if (this.closed) throw new StoreUnavailableError(`event store ${this.file} is closed`);
    if (this.failure) throw new StoreUnavailableError(`event store ${this.file} cannot write: ${this.failure.message}`, { cause: this.failure });
  }

  private head(): bigint {
    return (this.sql.head.get() as bigint | null) ?? -1n;
  }

  /**
   * A stream's last revision inside the batch transaction: written earlier in this batch, else held in
   * memory (every committed event is, until evicted), else from the (stream_id, revision) index.
   */
  private streamHead(stream: string): bigint | undefined {
    return this.batchHeads.get(stream) ?? this.recent.lastRevision(stream) ?? (this.sql.streamRevision.get(stream) as bigint | undefined);
  }

  /** One append inside the batch transaction; throws to undo just this append. */
  private write(job: AppendJob, created: number): AppendResult {
    const { stream, expected, events } = job;
    const current = this.streamHead(stream);
    const conflict = () => new WrongExpectedVersionError(stream, expected, current ?? "no_stream");
    if (job.mayBeRetry) {
      const original = this.findOriginal(job);
      if (original === "partial") throw conflict();
      if (original) return { ...original, dataLengths: events.map((e) => e.held.length) };
    }
    if (!satisfies(expected, current)) throw conflict();
    if (events.length === 0) return { nextExpectedRevision: current ?? -1n, position: this.head() };
    let revision = current ?? -1n;
    let position = -1n;
    const inserted: CommittedEvent[] = [];
    job.inserted = inserted;
    try {
      for (const e of events) {
        revision++;
        position = this.sql.insert.run(stream, revision, e.id, e.type, e.data, e.metadata, created).lastInsertRowid as bigint;
        inserted.push(new CommittedEvent(position, stream, revision, e.id, e.type, e.held, e.metadata, created));
      }
    } catch (error) {
      // Some of the ids exist already (the first one did not): ESDB answers a partial duplicate with a conflict.
      if (isDuplicateEventId(error)) throw conflict();
      throw error;
    }
    this.batchHeads.set(stream, revision);
    return { nextExpectedRevision: revision, position, dataLengths: events.map((e) => e.held.length) };
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
    const rows = take<[string, bigint]>(this.sql.idsFrom, [job.stream, revision], n);
    if (rows.length !== n || rows.some((row, i) => row[0] !== job.events[i].id)) return "partial";
    return { nextExpectedRevision: revision + BigInt(n - 1), position: rows[n - 1][1] };
  }

  private afterCommit(jobs: AppendJob[], outcomes: Outcome<AppendResult>[]): void {
    this.counters.transactions++;
    const touched = new Set<string>();
    let last = -1n;
    jobs.forEach((job, i) => {
      const outcome = outcomes[i];
      if (!outcome.ok) {
        job.ticket?.failed(outcome.error);
        return;
      }
      job.ticket?.written();
      this.counters.appends++;
      this.counters.events += job.events.length;
      // An idempotent retry inserted nothing (inserted is unset): its events are already in the log.
      if (!job.inserted || job.inserted.length === 0) return;
      touched.add(job.stream);
      this.recent.add(job.inserted);
      last = job.inserted[job.inserted.length - 1].position;
    });
    if (touched.size === 0) return;
    this.undelivered.push({ position: last, touched });
    this.durability.committedUpTo(last);
  }

  /** Wakes the subscribers of the streams whose commits are now durable. */
  private deliverUpTo(position: bigint): void {
    let n = 0;
    while (n < this.undelivered.length && this.undelivered[n].position <= position) n++;
    if (n === 0) return;
    const done = this.undelivered.splice(0, n);
    const touched = n === 1 ? done[0].touched : new Set(done.flatMap((d) => [...d.touched]));
    this.hub.notify(touched);
  }
}

/**
 * Throws unless every append `after` names is in the log or was written earlier in this batch
 * (`here`): a failed one's error, or, for one not tried yet, a plain error (it must have been
 * submitted before its dependant, to this store).
 */
function dependenciesWritten(after: readonly AppendTicket[], here: ReadonlyMap<AppendTicket, { ok: true } | { ok: false; error: unknown }>): void {
  for (const ticket of after) {
    if (ticket.state === "written") continue;
    if (ticket.state === "failed") throw ticket.error;
    const outcome = here.get(ticket);
    if (outcome?.ok) continue;
    if (outcome) throw outcome.error;
    throw new Error("append: it depends on an append that was not tried before it");
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

/** A checked event as the events table stores it (JSON text, metadata NULL when there is none) and as the recent events hold it. */
function toStored(event: CheckedEvent): PreparedEvent {
  const metadata = event.metadata === undefined ? null : JSON.stringify(event.metadata);
  return { id: event.id, type: event.type, data: event.json, held: event.dataJson ?? event.json, metadata };
}

function eventOf(e: CommittedEvent): RecordedEvent {
  return e.event;
}

function isDuplicateEventId(error: unknown): boolean {
  const e = error as { code?: unknown; message?: unknown } | null;
  return e?.code === "SQLITE_CONSTRAINT_UNIQUE" && String(e.message).includes("events.event_id");
}

/** How a page reads what it is made of: stored rows or events held in memory, by revision in a stream or by position in `$all`. */
interface PageAccess<T> {
  position(item: T): bigint;
  cursor(item: T): bigint;
  /** The JSON text the page keeps alive for it. */
  bytes(item: T): number;
  event(item: T): RecordedEvent;
}

const rowBytes = (row: Row) => row[5].length + (row[6]?.length ?? 0);
const heldBytes = (e: CommittedEvent) => e.data.length + (e.metadata?.length ?? 0);
const ROW_IN_STREAM: PageAccess<Row> = { position: (row) => row[0], cursor: (row) => row[2], bytes: rowBytes, event: toRecorded };
const ROW_IN_ALL: PageAccess<Row> = { ...ROW_IN_STREAM, cursor: (row) => row[0] };
const HELD_IN_STREAM: PageAccess<CommittedEvent> = { position: (e) => e.position, cursor: (e) => e.revision, bytes: heldBytes, event: eventOf };
const HELD_IN_ALL: PageAccess<CommittedEvent> = { ...HELD_IN_STREAM, cursor: (e) => e.position };

/**
 * A page of `items` (in log order): it ends before the first item past `limit` (not readable yet: at the head),
 * after PAGE_SIZE items examined, or before the kept item that would take it past SUBSCRIPTION_BUFFER.maxBytes
 * (it keeps at least one); `stop` says which, "end" when the items ran out. Items `keep` refuses still move the
 * cursor but are not held. Events are parsed as the consumer iterates.
 */
function pageOf<T>(
  items: Iterable<T>,
  access: PageAccess<T>,
  limit: bigint | undefined,
  keep?: (item: T) => boolean,
): { page: Page; stop: "limit" | "size" | "end" } {
  const kept: T[] = [];
  let bytes = 0;
  let examined = 0;
  let cursor: bigint | undefined;
  let stop: "limit" | "size" | "end" = "end";
  for (const item of items) {
    if (limit !== undefined && access.position(item) > limit) {
      stop = "limit";
      break;
    }
    if (!keep || keep(item)) {
      const size = access.bytes(item);
      if (kept.length > 0 && bytes + size > SUBSCRIPTION_BUFFER.maxBytes) {
        stop = "size";
        break;
      }
      kept.push(item);
      bytes += size;
    }
    cursor = access.cursor(item);
    if (++examined >= PAGE_SIZE) {
      stop = "size";
      break;
    }
  }
  return { page: { events: lazily(kept, access.event), cursor, atHead: stop !== "size", count: kept.length, bytes }, stop };
}

/** Makes each event as it is iterated: the events before a broken row are still delivered, then its error. */
function* lazily<T>(items: T[], event: (item: T) => RecordedEvent): Generator<RecordedEvent> {
  for (const item of items) yield event(item);
}

function min(a: bigint, b: bigint): bigint {
  return a < b ? a : b;
}
