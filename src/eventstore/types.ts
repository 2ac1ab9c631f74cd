/**
 * The event store port. Semantics follow EventStoreDB so that every adapter behaves the same:
 * streams `<category>-<id>`, 0-based revisions per stream, a global strictly increasing position
 * per event, optimistic concurrency through an expected revision, idempotency by event id,
 * catch-up subscriptions whose start points are exclusive.
 */

/** What the writer expects of the stream before its append. */
export type ExpectedRevision = "any" | "no_stream" | "stream_exists" | bigint;

/** What a stream actually is: absent, or the revision of its last event. */
export type CurrentRevision = "no_stream" | bigint;

export interface EventData {
  /** UUID chosen by the writer; an append retried with the same ids is not duplicated. Generated when absent. */
  id?: string;
  type: string;
  data: unknown;
  /**
   * What the log stores in place of `data` (the encrypting store's sealed form of it). Whatever is read from the
   * log is this; the copy a store holds in memory of an event this process appended (the SQLite store's recent
   * events) is `data`, as given.
   */
  storedData?: unknown;
  /** storedData's JSON text, made by its writer (as JSON.stringify would): a store that writes text takes it as it is. */
  storedText?: string;
  /** The data's JSON text when the writer made it already (as jsonTextOf does): a store that needs it takes it as it is. */
  dataText?: string;
  metadata?: Record<string, unknown>;
}

/**
 * An event as read. Readers must not change it: a store may hand one object to every reader in the process
 * (the SQLite store does, deep-frozen, for recently committed events and live subscribers).
 */
export interface RecordedEvent {
  streamId: string;
  id: string;
  type: string;
  /** 0-based revision in its stream. */
  revision: bigint;
  /** Global position in `$all`: strictly increasing, unique per event. */
  position: bigint;
  data: unknown;
  metadata: Record<string, unknown>;
  created: Date;
}

export interface AppendResult {
  /** Revision of the last event now in the stream (what to pass as `expected` next time). */
  nextExpectedRevision: bigint;
  /** Global position of the last event of this append. */
  position: bigint;
  /**
   * The length of each appended event's data as JSON text, in order, when the store made that text itself (the
   * embedded store does): a caller that accounts for what it holds need not serialise the same data again.
   */
  dataLengths?: readonly number[];
}

export type Direction = "forwards" | "backwards";

export interface ReadStreamOptions {
  /** Inclusive start revision; default "start" forwards, "end" backwards. */
  fromRevision?: bigint | "start" | "end";
  direction?: Direction;
  maxCount?: number;
  /** Read what the log stores (see EventData.storedData), never the copies this process holds of its own appends. */
  fromStorage?: boolean;
}

export interface ReadAllOptions {
  /** Inclusive start position; default "start". */
  fromPosition?: bigint | "start";
  maxCount?: number;
  filter?: EventFilter;
}

export interface EventFilter {
  /** Keep events whose stream name starts with one of these prefixes. */
  streamPrefixes?: string[];
  /** Keep events whose type is one of these. */
  eventTypes?: string[];
}

export interface StreamSubscriptionOptions {
  /** Exclusive start: deliver the events after this revision. Default "start" (everything); "end" = live only. */
  fromRevision?: bigint | "start" | "end";
  /** Names a long-lived subscription in health reports (/ok, /info, /metrics); unnamed ones are only counted. */
  name?: string;
}

export interface AllSubscriptionOptions {
  /** Exclusive start: deliver the events after this position. Default "start"; "end" = live only. */
  fromPosition?: bigint | "start" | "end";
  filter?: EventFilter;
  /** Names a long-lived subscription in health reports (/ok, /info, /metrics); unnamed ones are only counted. */
  name?: string;
}

export type SubscriptionItem =
  | { kind: "event"; event: RecordedEvent }
  /** History has been delivered; from here on events are live. Sent once. */
  | { kind: "caughtUp" };

/**
 * A catch-up subscription. What it holds for a consumer that does not pull is bounded, whatever the log's
 * rate (SUBSCRIPTION_BUFFER in subscription-buffers.ts): at most one page, 1000 events and 256 KiB of event
 * data on the embedded store (one event when it alone is larger), 500 events of history or 256 live events
 * on EventStoreDB. Past the bound it reads on from the log after the last event delivered, so a slow
 * consumer loses nothing: start points stay exclusive, events come in order, once each, `caughtUp` once.
 */
export interface Subscription extends AsyncIterable<SubscriptionItem> {
  /** Stops delivery and releases everything the subscription holds; the iterator then ends. */
  close(): Promise<void>;
}

export interface AppendOptions {
  /**
   * Someone is waiting for this append (a run's end: `/wait`, `/join`, webhooks). The embedded
   * store commits it, with whatever else is queued, as soon as the current callback returns,
   * instead of batching it for the rest of the event loop's turn. EventStoreDB sends every append
   * at once anyway.
   */
  urgent?: boolean;
  /** Learns this append's outcome, so that later appends may depend on it (`after`). */
  ticket?: AppendTicket;
  /**
   * Earlier appends (their tickets) this one depends on: it is written only if they all were, and
   * otherwise fails with the first one's error, writing nothing. The embedded store writes it in
   * the same transaction as those still queued, without waiting for their commit (one commit, one
   * fsync, for a run's last writes and its end); EventStoreDB waits for them, then appends.
   */
  after?: readonly AppendTicket[];
}

/**
 * The outcome of one append, for appends that depend on it (AppendOptions.after). Given to the
 * store with the append (`ticket`) and settled by it: `written` as soon as the append is in the
 * log (readable in this process), or `failed` with the append's error.
 */
export class AppendTicket {
  #state: "pending" | "written" | "failed" = "pending";
  #error: unknown;
  /** Made when someone waits (a store that appends one call at a time): the embedded store only looks at the state. */
  #waiting: { promise: Promise<void>; resolve: () => void; reject: (error: unknown) => void } | undefined;

  get state(): "pending" | "written" | "failed" {
    return this.#state;
  }

  /** The append's error once it failed. */
  get error(): unknown {
    return this.#error;
  }

  /** Resolves once the append is written, rejects with its error. */
  get settled(): Promise<void> {
    if (this.#state === "written") return Promise.resolve();
    if (this.#state === "failed") return Promise.reject(this.#error);
    if (!this.#waiting) {
      let settle!: { resolve: () => void; reject: (error: unknown) => void };
      const promise = new Promise<void>((resolve, reject) => (settle = { resolve, reject }));
      this.#waiting = { promise, ...settle };
    }
    return this.#waiting.promise;
  }

  /** For stores: the append is in the log. */
  written(): void {
    if (this.#state !== "pending") return;
    this.#state = "written";
    this.#waiting?.resolve();
  }

  /** For stores: the append failed (nothing of it is in the log). */
  failed(error: unknown): void {
    if (this.#state !== "pending") return;
    this.#state = "failed";
    this.#error = error;
    this.#waiting?.reject(error);
  }
}

/** Waits for the appends `after` names: resolves once all were written, rejects with the first failure (for stores that append one call at a time). */
export async function appendsWritten(after: readonly AppendTicket[] | undefined): Promise<void> {
  for (const ticket of after ?? []) await ticket.settled;
}

/** What `purgeStreams` leaves behind, which differs by adapter (callers and the contract suite ask). */
export interface PurgeBehaviour {
  /**
   * Each purged event keeps its place in its stream and in `$all` as a tombstone (`EventPurged`,
   * `{ purged_type }`, its metadata kept): SQLite. Otherwise a read of a purged stream answers
   * empty, and the stream goes on after its last revision: EventStoreDB.
   */
  readonly tombstones: boolean;
  /**
   * The content is gone from every read, `$all` included, and from the files once purgeStreams
   * returns: SQLite. Otherwise deleted events stay readable in `$all` until the operator's next
   * scavenge: EventStoreDB (a soft delete).
   */
  readonly immediate: boolean;
}

export interface EventStore {
  /** Which adapter this is (wrappers pass it on); see also purgeBehaviourOf. */
  readonly kind: "sqlite" | "esdb";
  /**
   * Appends atomically. Throws WrongExpectedVersionError when `expected` does not hold. Resolves once the events are
   * committed and readable; they may not yet survive power loss (see whenDurable).
   */
  append(stream: string, events: EventData[], expected?: ExpectedRevision, options?: AppendOptions): Promise<AppendResult>;
  /** A missing stream reads as empty. */
  readStream(stream: string, options?: ReadStreamOptions): Promise<RecordedEvent[]>;
  readAll(options?: ReadAllOptions): Promise<RecordedEvent[]>;
  /**
   * Resolves once everything committed so far survives power loss; undefined when it already does. Subscriptions
   * deliver durable events only; whoever reports other writes outside the process (an HTTP response) awaits this
   * first. EventStoreDB acknowledges durable appends: always undefined.
   */
  whenDurable(): Promise<void> | undefined;
  /** Position of the last event in `$all`, or -1n when the log is empty. */
  headPosition(): Promise<bigint>;
  subscribeToStream(stream: string, options?: StreamSubscriptionOptions): Subscription;
  subscribeToAll(options?: AllSubscriptionOptions): Subscription;
  /**
   * Removes the content of these streams from the log (a thread purge). SQLite keeps each event's
   * place (position, stream, revision, id, time, metadata) and replaces its type and data by a
   * tombstone (`EventPurged`, `{ purged_type }`), zeroing the old bytes in the file and its WAL;
   * EventStoreDB deletes the streams (see purgeBehaviourOf). Missing streams are ignored. Readers and folds
   * must accept tombstones (skip them).
   */
  purgeStreams(streams: readonly string[]): Promise<void>;
  /**
   * Syncs to disk so far and their total seconds, for a store that syncs its own file (the embedded log's WAL);
   * EventStoreDB syncs on its server and leaves it out. Wrappers need not pass it on: ask the adapter.
   */
  syncStats?(): { count: number; seconds: number };
  /** Waits for in-flight appends, closes subscriptions, releases the store. */
  close(): Promise<void>;
}

export class WrongExpectedVersionError extends Error {
  readonly code = "WRONG_EXPECTED_VERSION";
  constructor(
    readonly stream: string,
    readonly expected: ExpectedRevision,
    readonly actual: CurrentRevision,
  ) {
    super(`Wrong expected version on stream "${stream}": expected ${String(expected)}, actual ${String(actual)}`);
    this.name = "WrongExpectedVersionError";
  }
}

/**
 * EventStoreDB's default `MaxAppendSize`: one append (all its events' data, metadata and types) may hold at most
 * this many bytes. Every adapter enforces it, so that what works on SQLite also works on EventStoreDB.
 */
export const MAX_APPEND_SIZE = 1_048_576;

/**
 * Bytes an append counts against MAX_APPEND_SIZE, as EventStoreDB sizes an event (`Event.SizeOnDisk`): data bytes
 * + metadata bytes + 2 × the type's length. Data and metadata are the UTF-8 JSON texts the stores write.
 */
export function eventSize(type: string, dataJson: string, metadataJson: string | null | undefined): number {
  return Buffer.byteLength(dataJson, "utf8") + (metadataJson ? Buffer.byteLength(metadataJson, "utf8") : 0) + 2 * type.length;
}

/** An append larger than MAX_APPEND_SIZE (EventStoreDB: `MaximumAppendSizeExceeded`). Nothing was written. */
export class AppendTooLargeError extends Error {
  readonly code = "APPEND_TOO_LARGE";
  constructor(
    readonly stream: string,
    readonly maxAppendSize: number,
    /** Bytes the append counted, when the store says (EventStoreDB does not). */
    readonly size?: number,
  ) {
    super(
      `Append to stream "${stream}" is too large${size === undefined ? "" : ` (${size} bytes)`}: at most ${maxAppendSize} bytes per append; split it into several appends`,
    );
    this.name = "AppendTooLargeError";
  }
}

/** An event that does not satisfy its schema; names where it is. */
export class InvalidEventError extends Error {
  readonly code = "INVALID_EVENT";
  constructor(
    readonly stream: string,
    readonly revision: bigint | undefined,
    readonly eventType: string,
    readonly reason: string,
    /** Its global position, for a stored event that cannot be read: a subscriber can skip it (quarantine). */
    readonly position?: bigint,
  ) {
    super(`Invalid event ${eventType} in stream "${stream}"${revision === undefined ? "" : ` at revision ${revision}`}: ${reason}`);
    this.name = "InvalidEventError";
  }
}

/**
 * The store cannot be reached or opened (connectivity, lock, permissions), or did not answer within
 * the deadline. At the HTTP edge: 503 with `Retry-After` (the client may try again).
 */
export class StoreUnavailableError extends Error {
  readonly code = "STORE_UNAVAILABLE";
  /** Seconds after which trying again is sensible. */
  readonly retryAfterSeconds: number;
  constructor(message: string, options?: { cause?: unknown; retryAfterSeconds?: number }) {
    super(message, options);
    this.name = "StoreUnavailableError";
    this.retryAfterSeconds = options?.retryAfterSeconds ?? 2;
  }
}

const PURGE_BEHAVIOURS: Record<EventStore["kind"], PurgeBehaviour> = {
  sqlite: { tombstones: true, immediate: true },
  // A stream delete is soft: its events stay in `$all` until a scavenge.
  esdb: { tombstones: false, immediate: false },
};

/** What `purgeStreams` leaves behind on this store's adapter. */
export function purgeBehaviourOf(store: Pick<EventStore, "kind">): PurgeBehaviour {
  return PURGE_BEHAVIOURS[store.kind];
}

/** The type of a purged event's tombstone (SQLite); its data is `{ purged_type }`. */
export const PURGED_EVENT_TYPE = "EventPurged";

/** The data of a tombstone: written by the SQLite adapter itself (not an event of the catalogue). */
export interface PurgedEventData {
  purged_type: string;
}

/** The type of the event a tombstone replaced; undefined when `event` is not a tombstone. */
export function purgedTypeOf(event: { type: string; data: unknown }): string | undefined {
  return event.type === PURGED_EVENT_TYPE ? (event.data as PurgedEventData | null)?.purged_type : undefined;
}

export function matchesFilter(streamId: string, type: string, filter: EventFilter | undefined): boolean {
  if (!filter) return true;
  if (filter.streamPrefixes && !filter.streamPrefixes.some((p) => streamId.startsWith(p))) return false;
  if (filter.eventTypes && !filter.eventTypes.includes(type)) return false;
  return true;
}
