import { mkdirSync, rmSync } from "node:fs";
import path from "node:path";
import Database from "better-sqlite3";
import type { EventFilter, EventStore, RecordedEvent, Subscription } from "../eventstore/types.js";
import { InvalidEventError, StoreUnavailableError } from "../eventstore/types.js";
import type { TableProjection } from "./table.js";
import { zeroFreedContent } from "../eventstore/sqlite-erase.js";
import { subscribeWithoutPurged } from "./purged-content.js";
import type { LogHealth } from "../eventstore/log-health.js";
import { positionWaitDeadline, READ_MODELS_LISTENER, READ_MODELS_SUBSCRIPTION, stoppedError } from "./health.js";
import { isEventFault, Quarantine } from "./quarantine.js";
import { keyMismatchOf, openDatabase } from "./encrypted-file.js";

/** Version of the store's own layout (meta table, batching); part of the schema fingerprint. */
const STORE_LAYOUT = 1;
/** Events folded per transaction at most (bounds the time one batch holds the event loop). */
const MAX_BATCH = 2000;
/** How long a batch nobody waits for may wait for the log's sync in flight before it is folded anyway (see start). */
const FOLD_DEFER_MS = 2;
/** SQLite page cache of the read-model database (KiB, negative = size): what reads may keep in memory. */
const CACHE_KIB = 4096;
/** Page cache while a rebuild writes the database (given back once it is done). */
const REBUILD_CACHE_KIB = 65536;
/** Pages the WAL may hold before a checkpoint (SQLite's default is 1,000), and the size it is cut back to. */
const WAL_AUTOCHECKPOINT_PAGES = 10_000;
const WAL_SIZE_LIMIT_BYTES = 64 * 1024 * 1024;

const META_DDL = `CREATE TABLE IF NOT EXISTS read_model_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID`;

export interface ReadModelStoreOptions {
  /** Path of the database file, or ":memory:". */
  file: string;
  tables: readonly TableProjection[];
  /** Encrypts the file at rest with this key (see encrypted-file.ts); undefined: a plain SQLite file. */
  key?: Buffer;
}

type Waiter = { position: bigint; resolve: () => void; reject: (e: unknown) => void };
type Writer = { table: TableProjection; apply: (event: RecordedEvent) => void; flush?: () => void };
/** A listener and the subscriber name its failures are quarantined under. */
type Listeners = Map<(event: RecordedEvent) => void, string>;

/**
 * The read-model database: indexed tables written by the TableProjections, fed by one catch-up
 * subscription to `$all` that the store filters to the streams and event types they fold.
 *
 * Each batch of events is applied in one transaction together with the position of its last event,
 * so the tables and the position can never disagree, whatever the moment of a crash. A start
 * resumes after the stored position; a missing database or a changed schema fingerprint (a table's
 * version, its DDL, or the layout) rebuilds everything from position 0. Nothing per entity is kept
 * in memory: readers query the tables.
 *
 * An event that a fold throws on is quarantined (see quarantine.ts) and the fold goes on with the
 * next one: a batch whose transaction fails is folded again event by event, each in a savepoint,
 * with the events that fail on their own left out (and recorded, in the same transaction). The
 * fast path is unchanged: a batch that folds is one transaction without savepoints. A listener
 * that throws on an event is isolated the same way. Only a failure of the database itself (full
 * disk, I/O) stops the runner.
 */
export class CatchUpRunner {
  readonly db: Database.Database;
  /** Made again after a failed fold: a writer may hold the failed batch's entities (see BatchedEntities). */
  private writers: Writer[];
  /** What the fold and the listeners skipped, with why (a table of this database). */
  readonly quarantine: Quarantine;
  private readonly filter: EventFilter;
  private readonly writePosition: Database.Statement;
  /** One batch folded into every table and the position stored, in one transaction (made once: better-sqlite3 builds a wrapper per call). */
  private readonly foldBatch: (batch: readonly RecordedEvent[], last: bigint) => void;
  /** After a failed batch: the same events each in a savepoint, those that fail left out and quarantined. */
  private readonly foldEach: (batch: readonly RecordedEvent[], last: bigint, skipped: Set<RecordedEvent>) => void;
  private readonly foldOne: (event: RecordedEvent) => void;
  private applied: bigint;
  /** Position of the last event delivered (durable, maybe not folded yet). */
  private delivered = -1n;
  private subscription: Subscription | undefined;
  private stopping = false;
  private done: Promise<void> | undefined;
  private waiters: Waiter[] = [];
  private failure: unknown;
  private readonly listeners: Listeners = new Map();
  /** Told of each event as it is delivered (durable, not yet folded); see onDelivered. */
  private readonly deliveredListeners: Listeners = new Map();
  /** Folds what was delivered and is not folded yet, now (see settle); a no-op until started. */
  private foldDelivered: () => void = () => undefined;
  /** Where a stop is reported, and how long a wait may outlast an unreachable log (see `start`). */
  private health: LogHealth | undefined;
  private waitDeadlineMs: number | undefined;
  /** What is left to do once a rebuild has folded the log (undefined: not rebuilding). */
  private pendingRebuild: { indexes: string[]; fingerprint: string } | undefined;
  /** Whether this start found no usable database and folds the log from position 0. */
  readonly rebuilding: boolean;
  /** Batches folded (one transaction each, once live), the events in them, and the seconds their transactions took. */
  private readonly folded = { batches: 0, events: 0, seconds: 0 };

  private constructor(
    db: Database.Database,
    readonly tables: readonly TableProjection[],
    rebuild: { indexes: string[]; fingerprint: string } | undefined,
  ) {
    this.db = db;
    this.rebuilding = rebuild !== undefined;
    this.pendingRebuild = rebuild;
    this.writers = prepareWriters(db, tables);
    this.quarantine = new Quarantine(db);
    this.filter = {
      streamPrefixes: [...new Set(tables.flatMap((t) => t.streamPrefixes))],
      eventTypes: [...new Set(tables.flatMap((t) => t.eventTypes))],
    };
    this.writePosition = db.prepare("INSERT INTO read_model_meta (key, value) VALUES ('position', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value");
    this.foldBatch = db.transaction((batch: readonly RecordedEvent[], last: bigint) => {
      for (const event of batch) {
        for (const { table, apply } of this.writers) if (concerns(table, event)) apply(event);
      }
      for (const { flush } of this.writers) flush?.();
      this.writePosition.run(String(last));
    });
    // Nested in the transaction above, better-sqlite3 makes each of these a savepoint.
    this.foldOne = db.transaction((event: RecordedEvent) => {
      for (const { table, apply } of this.writers) if (concerns(table, event)) apply(event);
      for (const { flush } of this.writers) flush?.();
    });
    this.foldEach = db.transaction((batch: readonly RecordedEvent[], last: bigint, skipped: Set<RecordedEvent>) => {
      for (const event of batch) {
        try {
          this.foldOne(event);
        } catch (error) {
          if (!this.isEventFault(error)) throw error;
          this.writers = prepareWriters(db, this.tables);
          this.quarantine.record(READ_MODELS_SUBSCRIPTION, event, error);
          skipped.add(event);
        }
      }
      this.writePosition.run(String(last));
    });
    const stored = db.prepare("SELECT value FROM read_model_meta WHERE key = 'position'").pluck().get() as string | undefined;
    this.applied = stored === undefined ? -1n : BigInt(stored);
  }

  /**
   * Opens (or creates, or rebuilds when its schema changed) the database. A rebuild creates the
   * tables now and their indexes once the log is folded (bulk inserts are faster without them);
   * the fingerprint is written last, so a rebuild cut short starts over at the next start.
   */
  static open(options: ReadModelStoreOptions): CatchUpRunner {
    const fingerprint = schemaFingerprint(options.tables);
    const readable = openReadable(options.file, options.key);
    const { stored, empty } = readable;
    let db = readable.db;
    if (stored === fingerprint) return new CatchUpRunner(db, options.tables, undefined);
    if (!empty) {
      // Another schema, or a rebuild that did not finish: read models are disposable caches of the log.
      db.close();
      removeDatabase(options.file);
      db = openFile(options.file, options.key);
    }
    const ddl = options.tables.flatMap((t) => t.ddl);
    const isIndex = (statement: string) => /^\s*CREATE\s+(UNIQUE\s+)?INDEX\b/i.test(statement);
    db.transaction(() => {
      db.exec(META_DDL);
      for (const statement of ddl) if (!isIndex(statement)) db.exec(statement);
    }).immediate();
    // A rebuild writes the whole database once: a larger page cache for it, and no WAL (each page
    // would be written twice, to the WAL and then back by the checkpoint). Its rollback journal is
    // kept in memory: a rebuild cut short may leave a torn file, which the next start finds without
    // a fingerprint (or unreadable) and rebuilds.
    db.pragma(`cache_size = -${REBUILD_CACHE_KIB}`);
    db.pragma("journal_mode = MEMORY");
    return new CatchUpRunner(db, options.tables, { indexes: ddl.filter(isIndex), fingerprint });
  }

  /** What the fold has done since this process opened the read models (for /metrics). */
  get foldStats(): { batches: number; events: number; seconds: number } {
    return { ...this.folded };
  }

  /** Position of the last event applied (and committed); -1n when none. */
  get position(): bigint {
    return this.applied;
  }

  /** The store-side filter of the subscription (for rebuild tools and diagnostics). */
  get eventFilter(): EventFilter {
    return this.filter;
  }

  /**
   * Subscribes after the stored position; resolves once the log's history is applied. Then follows
   * the log live until `stop`.
   */
  start(store: EventStore, options: { health?: LogHealth; waitDeadlineMs?: number; foldDeferMs?: number } = {}): Promise<void> {
    const foldDeferMs = options.foldDeferMs ?? FOLD_DEFER_MS;
    this.health = options.health;
    this.waitDeadlineMs = options.waitDeadlineMs;
    // The store re-subscribes from our position after a drop; only a failure that stays ends this.
    const subscribe = () => {
      const from = this.applied < 0n ? "start" : this.applied;
      this.subscription = subscribeWithoutPurged(store, this.db, { fromPosition: from, filter: this.filter, name: READ_MODELS_SUBSCRIPTION });
      return this.subscription;
    };
    return new Promise<void>((resolveCaughtUp, rejectCaughtUp) => {
      this.done = (async () => {
        const batch: RecordedEvent[] = [];
        let flushScheduled = false;
        /** The scheduled fold waits for the log's sync in flight (see below). */
        let deferred = false;
        const flush = () => {
          flushScheduled = false;
          deferred = false;
          if (batch.length === 0) return;
          const skipped = this.commit(batch);
          const events = batch.splice(0);
          this.release();
          // The tables do not show a quarantined event: its listeners are not told of it either.
          for (const event of events) if (!skipped?.has(event)) this.tell(this.listeners, event);
        };
        // Outside the loop below (a scheduled fold, settle): a failure stops the subscription here.
        const flushOrStop = () => {
          try {
            flush();
          } catch (error) {
            this.fail(error, rejectCaughtUp);
            void this.subscription?.close();
          }
        };
        this.foldDelivered = () => {
          if (batch.length > 0 && !this.failure) flushOrStop();
        };
        try {
          for (let subscription = subscribe(); ; subscription = subscribe()) {
            try {
              for await (const item of subscription) {
                if (item.kind === "caughtUp") {
                  flush();
                  this.finishRebuild();
                  resolveCaughtUp();
                  continue;
                }
                batch.push(item.event);
                this.delivered = item.event.position;
                this.tell(this.deliveredListeners, item.event);
                if (batch.length >= MAX_BATCH) flush();
                else if (deferred && this.waitedFor(item.event.position)) {
                  // Someone waits for an event that joined a batch put off: folded now after all.
                  deferred = false;
                  setImmediate(flushOrStop);
                } else if (!flushScheduled) {
                  // Everything the subscription has at hand now goes into one transaction. When someone waits
                  // for it (a command's read-your-writes), it is written as soon as it has to wait for more.
                  // Otherwise it first waits for the sync the log has in flight (at most FOLD_DEFER_MS): the
                  // answers waiting for that sync go out before the fold takes the event loop, and the events
                  // the sync brings join the same transaction. Requests never see the difference: each one
                  // folds what was delivered before it is served (settle).
                  flushScheduled = true;
                  const pending = this.waitedFor(item.event.position) ? undefined : store.whenDurable();
                  deferred = pending !== undefined;
                  if (pending) afterAtMost(pending, foldDeferMs, () => setImmediate(flushOrStop));
                  else setImmediate(flushOrStop);
                }
              }
              break;
            } catch (error) {
              // An event the store cannot even read (its JSON broken around the store): the events before
              // it were delivered; it is quarantined and the subscription starts again after it.
              const at = error instanceof InvalidEventError ? error.position : undefined;
              if (at === undefined || at <= this.applied || this.stopping || this.failure) throw error;
              await subscription.close();
              flush();
              this.skipUnreadable(error as InvalidEventError, at);
            }
          }
          flush();
          this.finishRebuild();
          resolveCaughtUp();
        } catch (error) {
          this.fail(error, rejectCaughtUp);
        }
      })();
    });
  }

  /** Resolves once every event up to `position` that the read models fold has been applied. */
  waitFor(position: bigint): Promise<void> {
    if (this.failure) return Promise.reject(stoppedError(this.failure));
    if (position <= this.applied) return Promise.resolve();
    const waiting = new Promise<void>((resolve, reject) => this.waiters.push({ position, resolve, reject }));
    // Delivered already, in a batch that is waiting for the log's sync (see start): folded now.
    if (position <= this.delivered) setImmediate(() => this.foldDelivered());
    // While the log is unreachable a wait would last as long as the outage: bounded by the deadline.
    return this.health && this.waitDeadlineMs !== undefined ? positionWaitDeadline(waiting, position, this.health, this.waitDeadlineMs) : waiting;
  }

  /** Like waitFor, but gives up (resolving false) after `ms`: for positions another process reported. */
  waitForAtMost(position: bigint, ms: number): Promise<boolean> {
    if (position <= this.applied) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(false), ms);
      timer.unref();
      this.waitFor(position).then(
        () => {
          clearTimeout(timer);
          resolve(true);
        },
        () => {
          clearTimeout(timer);
          resolve(false);
        },
      );
    });
  }

  /**
   * Calls `listener` for each applied event once its batch is committed (the tables show it),
   * e.g. so the run worker learns that a run became startable. Returns the unsubscribe function.
   */
  onApplied(listener: (event: RecordedEvent) => void, name: string = READ_MODELS_LISTENER): () => void {
    this.listeners.set(listener, name);
    return () => this.listeners.delete(listener);
  }

  /**
   * Calls `listener` with each event as soon as it is delivered: durable in the log, but not yet in
   * the tables (the batch it is in is folded at the end of this turn of the event loop, or by
   * `settle`). For whoever answers from the log itself, e.g. a run's result once its end is durable,
   * without waiting for the fold. Returns the unsubscribe function.
   */
  onDelivered(listener: (event: RecordedEvent) => void, name: string = READ_MODELS_LISTENER): () => void {
    this.deliveredListeners.set(listener, name);
    return () => this.deliveredListeners.delete(listener);
  }

  /**
   * Folds the delivered events that are not folded yet, now: a request served after a response that
   * was sent from the log (see onDelivered) then finds the tables showing everything that response said.
   */
  settle(): void {
    this.foldDelivered();
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await this.subscription?.close();
    await this.done;
    for (const w of this.waiters.splice(0)) w.reject(new Error("read-model store stopped"));
  }

  /** Stops and closes the database. */
  async close(): Promise<void> {
    await this.stop();
    if (this.db.open) this.db.close();
  }

  /** After a rebuild folded the log: the indexes, then the fingerprint that marks the database complete. */
  private finishRebuild(): void {
    const pending = this.pendingRebuild;
    if (!pending) return;
    this.pendingRebuild = undefined;
    // The indexes are built in the rebuild's transaction, still without a WAL; the fingerprint is
    // written once the database is back in WAL mode, as the last step.
    if (!this.db.inTransaction) this.db.exec("BEGIN");
    for (const statement of pending.indexes) this.db.exec(statement);
    this.db.exec("COMMIT");
    this.db.pragma("journal_mode = WAL");
    this.db
      .prepare("INSERT INTO read_model_meta (key, value) VALUES ('fingerprint', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value")
      .run(pending.fingerprint);
    this.db.pragma("wal_checkpoint(TRUNCATE)");
    this.db.pragma(`cache_size = -${CACHE_KIB}`);
    this.db.pragma("shrink_memory");
  }

  /** Folds one batch and stores its position; returns the events it quarantined, if any. */
  private commit(batch: readonly RecordedEvent[]): ReadonlySet<RecordedEvent> | undefined {
    const last = batch[batch.length - 1].position;
    // A rebuild is one transaction (each batch a savepoint in it): pages are written once, not once
    // per batch. Nothing is lost by it: a rebuild cut short starts over (the fingerprint comes last).
    if (this.pendingRebuild && !this.db.inTransaction) this.db.exec("BEGIN");
    const started = process.hrtime.bigint();
    let skipped: Set<RecordedEvent> | undefined;
    try {
      this.foldBatch(batch, last);
    } catch (error) {
      if (!this.isEventFault(error)) throw error;
      // The batch was rolled back: folded again one event at a time, without those that fail alone.
      this.writers = prepareWriters(this.db, this.tables);
      skipped = new Set();
      this.foldEach(batch, last, skipped);
    }
    this.folded.seconds += Number(process.hrtime.bigint() - started) / 1e9;
    this.folded.batches++;
    this.folded.events += batch.length;
    this.applied = last;
    return skipped;
  }

  /** An event the store could not read: quarantined, and the position moved past it, in one transaction. */
  private skipUnreadable(error: InvalidEventError, position: bigint): void {
    if (this.pendingRebuild && !this.db.inTransaction) this.db.exec("BEGIN");
    this.db.transaction(() => {
      this.quarantine.record(READ_MODELS_SUBSCRIPTION, { streamId: error.stream, position, revision: error.revision, type: error.eventType }, error);
      this.writePosition.run(String(position));
    })();
    this.applied = position;
    this.delivered = position;
    this.release();
  }

  /** Whether a failed fold is the events' fault (not the database's: closed, full, I/O). */
  private isEventFault(error: unknown): boolean {
    return this.db.open && isEventFault(error);
  }

  /** Calls each listener with `event`; one that throws is quarantined under its name, and the others still hear of it. */
  private tell(listeners: Listeners, event: RecordedEvent): void {
    listeners.forEach((name, listener) => {
      try {
        listener(event);
      } catch (error) {
        this.quarantine.tryRecord(name, event, error);
      }
    });
  }

  private fail(error: unknown, reject: (e: unknown) => void): void {
    if (this.failure) return;
    this.failure = error;
    this.health?.consumerStopped(READ_MODELS_SUBSCRIPTION, error);
    reject(error);
    for (const w of this.waiters.splice(0)) w.reject(stoppedError(error));
  }

  /** Whether a waitFor is waiting for an event at or before `position`. */
  private waitedFor(position: bigint): boolean {
    return this.waiters.some((w) => w.position <= position);
  }

  private release(): void {
    if (this.waiters.length === 0) return;
    const still: Waiter[] = [];
    for (const w of this.waiters)
      if (w.position <= this.applied) w.resolve();
      else still.push(w);
    this.waiters = still;
  }
}

/** Calls `then` once `promise` settles or `ms` have passed, whichever comes first. */
function afterAtMost(promise: Promise<unknown>, ms: number, then: () => void): void {
  let called = false;
  const once = () => {
    if (called) return;
    called = true;
    clearTimeout(timer);
    then();
  };
  const timer = setTimeout(once, ms);
  promise.then(once, once);
}

function prepareWriters(db: Database.Database, tables: readonly TableProjection[]): Writer[] {
  return tables.map((table) => {
    const prepared = table.prepare(db);
    return typeof prepared === "function"
      ? { table, apply: prepared }
      : { table, apply: (e: RecordedEvent) => prepared.apply(e), flush: () => prepared.flush() };
  });
}

function concerns(table: TableProjection, event: RecordedEvent): boolean {
  return table.streamPrefixes.some((p) => event.streamId.startsWith(p)) && table.eventTypes.includes(event.type);
}

/** Changes whenever a table's version or DDL changes: such a database is rebuilt from the log. */
export function schemaFingerprint(tables: readonly TableProjection[]): string {
  return JSON.stringify({ layout: STORE_LAYOUT, tables: tables.map((t) => [t.name, t.version, t.ddl]) });
}

function openFile(file: string, key: Buffer | undefined): Database.Database {
  let db: Database.Database | undefined;
  try {
    if (file !== ":memory:") mkdirSync(path.dirname(file), { recursive: true });
    db = openDatabase(file, { timeout: 200 }, key);
    // One process owns its read models: taking the write lock now makes a second process sharing
    // the data directory fail at start, instead of both writing the same tables.
    db.pragma("locking_mode = EXCLUSIVE");
    db.pragma("journal_mode = WAL");
    db.exec("BEGIN IMMEDIATE; COMMIT");
    // The log is the source of truth: a commit lost to power loss is re-applied from the stored position.
    db.pragma("synchronous = NORMAL");
    db.pragma(`cache_size = -${CACHE_KIB}`);
    db.pragma("temp_store = MEMORY");
    // Rows land on random pages (ids are UUIDs): a longer WAL between checkpoints writes a page
    // changed many times once. The WAL index of an exclusive connection is on the heap (~8 bytes a page).
    db.pragma(`wal_autocheckpoint = ${WAL_AUTOCHECKPOINT_PAGES}`);
    db.pragma(`journal_size_limit = ${WAL_SIZE_LIMIT_BYTES}`);
    zeroFreedContent(db, "ON"); // rows are rewritten in place: a purged row's older versions must not linger in free space
    return db;
  } catch (error) {
    // Closed now: the caller may remove the file and open it again (a key mismatch, a torn file).
    db?.close();
    const code = (error as { code?: string }).code;
    if (code === "SQLITE_BUSY" || code === "SQLITE_LOCKED")
      throw new StoreUnavailableError(`read-model database ${file} is locked by another process (give each server process its own DATA_DIR)`, { cause: error });
    throw new StoreUnavailableError(`cannot open read-model database ${file}: ${(error as Error).message}`, { cause: error });
  }
}

/**
 * Opens the database and reads its fingerprint. A file that is not a readable database (what a
 * rebuild cut short while writing without a WAL may leave) is removed and created anew; one that
 * the key does not open is the caller's to remove (a ReadModelsKeyMismatch), as what to tell the
 * operator then is theirs to say.
 */
function openReadable(file: string, key: Buffer | undefined): { db: Database.Database; stored: string | undefined; empty: boolean } {
  let db: Database.Database | undefined;
  try {
    db = openFile(file, key);
    return { db, stored: readFingerprint(db), empty: !hasTables(db) };
  } catch (error) {
    if (!isUnreadable(error)) throw error;
    db?.close();
    const mismatch = keyMismatchOf(file, key, error);
    if (mismatch) throw mismatch;
    removeDatabase(file);
    return { db: openFile(file, key), stored: undefined, empty: true };
  }
}

function isUnreadable(error: unknown): boolean {
  const codes = [(error as { code?: unknown }).code, (error as { cause?: { code?: unknown } }).cause?.code];
  return codes.some((code) => code === "SQLITE_NOTADB" || (typeof code === "string" && code.startsWith("SQLITE_CORRUPT")));
}

function readFingerprint(db: Database.Database): string | undefined {
  const hasMeta = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'read_model_meta'").get();
  if (!hasMeta) return undefined;
  return db.prepare("SELECT value FROM read_model_meta WHERE key = 'fingerprint'").pluck().get() as string | undefined;
}

function hasTables(db: Database.Database): boolean {
  return (db.prepare("SELECT count(*) FROM sqlite_master").pluck().get() as number) > 0;
}

function removeDatabase(file: string): void {
  for (const suffix of ["", "-wal", "-shm"]) rmSync(file + suffix, { force: true });
}
