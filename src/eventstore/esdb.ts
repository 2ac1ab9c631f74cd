/**
 * The event store port on EventStoreDB, through `@eventstore/db-client` 6.x (gRPC).
 *
 * - Revisions are EventStoreDB's own (0-based). Expected revisions are mapped in one place (`toAppendOptions`).
 * - Global positions are the transaction-file commit position (see `fromClientPosition` for why that is unique,
 *   strictly increasing and round-trips to `{ commit, prepare }`).
 * - Our `$all` never shows system events or streams (`$`-prefixed type or stream name): filtered client-side in
 *   reads (6.x `readAll` has no server filter) and both server- and client-side in subscriptions.
 * - A missing stream reads as `[]` (the client throws StreamNotFoundError).
 * - Connectivity failures surface as StoreUnavailableError with a one-line message.
 * - Living with a distributed log: appends and reads that fail for want of a connection (or answer
 *   `not leader`) are tried again, with the same event ids, until they succeed or the deadline passes
 *   (then StoreUnavailableError: 503 at the HTTP edge); a conflict is never retried. Subscriptions
 *   re-subscribe from their cursor after a drop (esdb-subscription.ts). Every outcome feeds LogHealth.
 * - A failed attempt may still have been written (a commit timeout, a connection lost before the answer).
 *   EventStoreDB recognises a retry by its event ids durably only for an exact expected revision (or
 *   no_stream); for `any` / `stream_exists` only while the ids are in its cache of recent writes, which a
 *   restart empties. So before trying such an append again, the adapter looks for its events at the end of
 *   the stream (`writtenBefore`) and takes them, found, as the append's result.
 */
import { randomUUID } from "node:crypto";
import type { Readable } from "node:stream";
import {
  ANY,
  BACKWARDS,
  END,
  EventStoreDBClient,
  FORWARDS,
  START,
  StreamNotFoundError,
  eventTypeFilter,
  excludeSystemEvents,
  jsonEvent,
  streamNameFilter,
  type AllStreamResolvedEvent,
  type Filter,
  type JSONType,
  type Position,
  type ResolvedEvent,
} from "@eventstore/db-client";
import {
  StoreUnavailableError,
  WrongExpectedVersionError,
  matchesFilter,
  appendsWritten,
  type AllSubscriptionOptions,
  type AppendOptions,
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
import { allSubscriptionStart, checkAppend, readAllArguments, readStreamArguments, streamSubscriptionStart, type CheckedEvent } from "./arguments.js";
import {
  fromClientPosition,
  isSystem,
  redactConnectionString,
  toAppendOptions,
  toAppendTooLarge,
  toClientPosition,
  toRecordedEvent,
  toStoreUnavailable,
  toWrongExpectedVersion,
} from "./esdb-mapping.js";
import { EsdbCatchUpSubscription, type CatchUpSource, type LiveSubscription } from "./esdb-subscription.js";
import { CALL_BACKOFF, retryWithin } from "./backoff.js";
import { LogHealth } from "./log-health.js";

export interface EsdbStoreOptions {
  /** e.g. `esdb://localhost:2113?tls=false`, or a cluster: `esdb://a:2113,b:2113,c:2113?nodePreference=leader` */
  connectionString: string;
  /** Where connection and subscription states are reported (a private one when absent). */
  health?: LogHealth;
  /** How long one append or read may take, retries included, before it fails as unavailable. Default 10 s. */
  deadlineMs?: number;
}

/** The default of EVENTSTORE_DEADLINE_MS. */
export const DEFAULT_DEADLINE_MS = 10_000;

const PAGE_SIZE = 500;
const MAX_INT64 = (1n << 63n) - 1n;
/**
 * How many events beyond its own an append retried with expected any / stream_exists looks back over at
 * the end of the stream for an earlier attempt (others may have appended after it within the deadline).
 */
const RETRY_LOOKBACK = 256;
/** Events per read of that look-back (a checkpoint event may be large: small pages). */
const RETRY_LOOKBACK_PAGE = 32;

/**
 * Connects to EventStoreDB and checks that it answers (one read of `$all`).
 * Rejects with StoreUnavailableError when the connection string is invalid or the server cannot be reached.
 */
export async function openEsdbStore(options: EsdbStoreOptions): Promise<EventStore> {
  const connectionString = options.connectionString;
  let client: EventStoreDBClient;
  try {
    client = EventStoreDBClient.connectionString(connectionString);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new StoreUnavailableError(`invalid EventStoreDB connection string ${redactConnectionString(connectionString)}: ${reason.replace(/\s+/g, " ")}`, {
      cause: error,
    });
  }
  const store = new EsdbStore(client, connectionString, options.health ?? new LogHealth(), options.deadlineMs ?? DEFAULT_DEADLINE_MS);
  try {
    await store.rawHead();
  } catch (error) {
    await client.dispose().catch(() => undefined);
    throw (
      toStoreUnavailable(error, connectionString) ??
      new StoreUnavailableError(
        `cannot use EventStoreDB at ${redactConnectionString(connectionString)}: ${error instanceof Error ? error.message : String(error)}`.replace(
          /\s+/g,
          " ",
        ),
        { cause: error },
      )
    );
  }
  return store;
}

interface PreparedEvent {
  id: string;
  type: string;
  data: JSONType;
  metadata: Record<string, unknown> | undefined;
}

class EsdbStore implements EventStore {
  readonly kind = "esdb" as const;
  private closed = false;
  /** Every call in progress (appends and reads): `close()` lets them finish before disposing the client. */
  private readonly inFlight = new Set<Promise<unknown>>();
  private readonly subscriptions = new Set<EsdbCatchUpSubscription>();
  /** Subscriptions from "end" whose end is being resolved: appends made through this store wait for them. */
  private readonly pendingStarts = new Set<Promise<unknown>>();

  /**
   * `nodePreference=leader`: every call asks for the leader, so a node that lost the leadership answers
   * `not leader` with the new leader's address, the client reconnects there, and the retry follows it.
   */
  private readonly requiresLeader: boolean;

  constructor(
    private readonly client: EventStoreDBClient,
    private readonly connectionString: string,
    private readonly health: LogHealth,
    private readonly deadlineMs: number,
  ) {
    this.requiresLeader = /[?&]nodePreference=leader(&|$)/i.test(connectionString);
  }

  /** Runs `operation` again while the log is unreachable, up to the deadline; a conflict or bad request fails at once. */
  private retrying<T>(what: string, operation: (remainingMs: number) => Promise<T>): Promise<T> {
    return retryWithin(operation, {
      deadlineMs: this.deadlineMs,
      policy: CALL_BACKOFF,
      isTransient: (error) => error instanceof StoreUnavailableError,
      shouldStop: () => this.closed,
      deadlineError: (last) =>
        new StoreUnavailableError(
          `EventStoreDB at ${redactConnectionString(this.connectionString)} did not complete ${what} within ${this.deadlineMs} ms${last instanceof Error ? `: ${last.message}` : ""}`,
          { cause: last },
        ),
    });
  }

  // ---------------------------------------------------------------------------------------------------- writes

  async append(stream: string, events: EventData[], expected: ExpectedRevision = "any", options: AppendOptions = {}): Promise<AppendResult> {
    try {
      // The client serialises with JSON.stringify: checked here that it can, with the reason when it cannot.
      const prepared = checkAppend(stream, events, expected, { newId: randomUUID, explainUnserialisable: true }, toPrepared);
      this.ensureOpen();
      // One append at a time: those it depends on first.
      await appendsWritten(options.after);
      // The same ids on every try: EventStoreDB takes a retry of an append it already wrote as that append
      // when the expected revision is exact; with any / stream_exists only if it still remembers the ids,
      // so such a retry first looks for an earlier attempt's events in the stream.
      let tried = false;
      const result = await this.track(
        this.retrying(`an append to ${stream}`, async (remainingMs) => {
          if (tried && (expected === "any" || expected === "stream_exists") && prepared.length > 0) {
            const earlier = await this.writtenBefore(stream, prepared);
            if (earlier) return earlier;
          }
          tried = true;
          return this.doAppend(stream, prepared, expected, remainingMs);
        }),
      );
      options.ticket?.written();
      return result;
    } catch (error) {
      options.ticket?.failed(error);
      throw error;
    }
  }

  private async doAppend(stream: string, events: PreparedEvent[], expected: ExpectedRevision, deadline?: number): Promise<AppendResult> {
    // A subscription from "end" created before this append must see it: let its end be resolved first.
    if (this.pendingStarts.size > 0) await Promise.allSettled([...this.pendingStarts]);
    if (events.length === 0) return this.emptyAppend(stream, expected);
    let result;
    try {
      result = await this.client.appendToStream(
        stream,
        events.map((e) => jsonEvent({ id: e.id, type: e.type, data: e.data, metadata: e.metadata as JSONType | undefined })),
        { ...toAppendOptions(expected), ...this.callOptions(deadline) },
      );
      this.health.reached();
    } catch (error) {
      throw toWrongExpectedVersion(error, stream, expected) ?? toAppendTooLarge(error, stream) ?? this.mapError(error);
    }
    const nextExpectedRevision = result.nextExpectedRevision;
    // For one event the append's position is that event's. For several, which event's position the server
    // reports has varied across versions, and idempotent retries report none: read the last event's own.
    let position = events.length === 1 ? fromClientPosition(result.position) : undefined;
    position ??= await this.positionOf(stream, nextExpectedRevision);
    return { nextExpectedRevision, position };
  }

  /**
   * The result of an earlier attempt of this append, if it was written: its events, in order and together
   * (one append is atomic), among the last RETRY_LOOKBACK events after them. Undefined when not found: the
   * earlier attempts were not written (or are buried deeper; then the server's own recognition is all
   * there is). The position is the last event's, as a stream read reports it.
   */
  private async writtenBefore(stream: string, events: PreparedEvent[]): Promise<AppendResult | undefined> {
    // EventStoreDB answers ids in lower case.
    const ids = events.map((e) => e.id.toLowerCase());
    let from: bigint | "end" = "end";
    for (let scanned = 0; scanned < events.length + RETRY_LOOKBACK;) {
      const page = await this.readStreamRaw(stream, { fromRevision: from, direction: "backwards", maxCount: RETRY_LOOKBACK_PAGE });
      const at = page.findIndex((e) => e.id.toLowerCase() === ids[0]);
      if (at >= 0) {
        // Ours from its first event on, forwards (they may continue past this page: read them).
        const ours = await this.readStreamRaw(stream, { fromRevision: page[at].revision, maxCount: events.length });
        if (ours.length !== events.length || ours.some((e, i) => e.id.toLowerCase() !== ids[i])) return undefined;
        const last = ours[ours.length - 1];
        return { nextExpectedRevision: last.revision, position: last.position };
      }
      scanned += page.length;
      const oldest = page.at(-1);
      if (page.length < RETRY_LOOKBACK_PAGE || oldest === undefined || oldest.revision === 0n) return undefined;
      from = oldest.revision - 1n;
    }
    return undefined;
  }

  /** Nothing to write: check the expectation like a write would, write nothing. */
  private async emptyAppend(stream: string, expected: ExpectedRevision): Promise<AppendResult> {
    const current = await this.lastRevision(stream);
    const ok =
      expected === "any" ||
      (expected === "no_stream" && current === undefined) ||
      (expected === "stream_exists" && current !== undefined) ||
      current === expected;
    if (!ok) throw new WrongExpectedVersionError(stream, expected, current ?? "no_stream");
    return { nextExpectedRevision: current ?? -1n, position: await this.head() };
  }

  private async positionOf(stream: string, revision: bigint): Promise<bigint> {
    const [event] = await this.readStreamRaw(stream, { fromRevision: revision, maxCount: 1 });
    return event?.revision === revision ? event.position : -1n;
  }

  // ----------------------------------------------------------------------------------------------------- reads

  async readStream(stream: string, options: ReadStreamOptions = {}): Promise<RecordedEvent[]> {
    const { direction, maxCount, from } = readStreamArguments(stream, options);
    this.ensureOpen();
    return this.track(this.retrying(`a read of ${stream}`, () => this.readStreamRaw(stream, { fromRevision: from, direction, maxCount })));
  }

  private async readStreamRaw(
    stream: string,
    options: { fromRevision: bigint | "start" | "end"; direction?: "forwards" | "backwards"; maxCount?: number },
  ): Promise<RecordedEvent[]> {
    if (options.maxCount === 0) return [];
    const from = options.fromRevision;
    const out: RecordedEvent[] = [];
    try {
      const read = this.client.readStream(stream, {
        fromRevision: from === "start" ? START : from === "end" ? END : from > MAX_INT64 ? MAX_INT64 : from,
        direction: options.direction === "backwards" ? BACKWARDS : FORWARDS,
        ...(options.maxCount === undefined ? {} : { maxCount: options.maxCount }),
        ...this.callOptions(),
      });
      const items = await drain<ResolvedEvent>(read);
      this.health.reached();
      for (const resolved of items) {
        const event = toRecordedEvent(resolved);
        if (event) out.push(event);
      }
    } catch (error) {
      if (error instanceof StreamNotFoundError) {
        this.health.reached();
        return [];
      }
      throw this.mapError(error);
    }
    return out;
  }

  async readAll(options: ReadAllOptions = {}): Promise<RecordedEvent[]> {
    const { from, maxCount } = readAllArguments(options);
    this.ensureOpen();
    return this.track(this.retrying("a read of $all", () => this.readAllFiltered(from, maxCount ?? Infinity, options.filter)));
  }

  /** 6.x `readAll` has no server-side filter: page through `$all` and filter here. */
  private async readAllFiltered(from: bigint | "start", wanted: number, filter: EventFilter | undefined): Promise<RecordedEvent[]> {
    const out: RecordedEvent[] = [];
    if (wanted <= 0) return out;
    let position: Position | "start" = from === "start" ? START : toClientPosition(from > MAX_INT64 ? MAX_INT64 : from);
    let seen = -1n; // the inclusive start of the next page re-reads its last event: skip up to here
    for (;;) {
      const page = await this.readAllPage(position, FORWARDS, PAGE_SIZE);
      let last: bigint | undefined;
      for (const raw of page) {
        const event = toRecordedEvent(raw);
        if (!event || event.position <= seen) continue;
        last = event.position;
        if (isSystem(event.streamId, event.type) || !matchesFilter(event.streamId, event.type, filter)) continue;
        out.push(event);
        if (out.length >= wanted) return out;
      }
      if (page.length < PAGE_SIZE || last === undefined) return out;
      seen = last;
      position = toClientPosition(last);
    }
  }

  private async readAllPage(from: Position | "start" | "end", direction: "forwards" | "backwards", count: number): Promise<AllStreamResolvedEvent[]> {
    try {
      const page = await drain<AllStreamResolvedEvent>(this.client.readAll({ fromPosition: from, direction, maxCount: count, ...this.callOptions() }));
      this.health.reached();
      return page;
    } catch (error) {
      throw this.mapError(error);
    }
  }

  /** EventStoreDB acknowledges an append once it is durable. */
  whenDurable(): undefined {
    return undefined;
  }

  async headPosition(): Promise<bigint> {
    this.ensureOpen();
    return this.track(this.retrying("a read of the head of $all", () => this.head()));
  }

  /** Position of the last non-system event of `$all`, or -1n. */
  private async head(): Promise<bigint> {
    let from: Position | "end" = END;
    for (;;) {
      const page = await this.readAllPage(from, BACKWARDS, 100);
      for (const raw of page) {
        const event = toRecordedEvent(raw);
        if (event && !isSystem(event.streamId, event.type) && event.position >= 0n) return event.position;
      }
      const last = page.length > 0 ? fromClientPosition(page[page.length - 1].event?.position) : undefined;
      if (page.length < 100 || last === undefined) return -1n;
      from = toClientPosition(last);
    }
  }

  /** Position of the last event of `$all`, system events included (a valid cursor), or -1n. */
  async rawHead(): Promise<bigint> {
    const [last] = await this.readAllPage(END, BACKWARDS, 1);
    return fromClientPosition(last?.event?.position) ?? -1n;
  }

  private async lastRevision(stream: string): Promise<bigint | undefined> {
    const [last] = await this.readStreamRaw(stream, { fromRevision: "end", direction: "backwards", maxCount: 1 });
    return last?.revision;
  }

  // ------------------------------------------------------------------------------------------ subscriptions

  subscribeToStream(stream: string, options: StreamSubscriptionOptions = {}): Subscription {
    const from = streamSubscriptionStart(stream, options);
    this.ensureOpen();
    const lastRevision = async () => (await this.lastRevision(stream)) ?? -1n;
    const source: CatchUpSource = {
      start:
        from === "start" ? Promise.resolve(-1n) : from === "end" ? this.resolveStart(lastRevision()) : Promise.resolve(from > MAX_INT64 ? MAX_INT64 : from),
      head: lastRevision,
      readAfter: async (cursor) => {
        const events = await this.readStreamRaw(stream, { fromRevision: cursor + 1n, maxCount: PAGE_SIZE });
        return { events, cursor: events.at(-1)?.revision ?? cursor, atEnd: events.length < PAGE_SIZE };
      },
      subscribeAfter: (cursor) =>
        this.client.subscribeToStream(stream, { fromRevision: cursor < 0n ? START : cursor, ...this.callOptions() }) as unknown as LiveSubscription,
      convert: (item) => {
        const event = toRecordedEvent(item as ResolvedEvent);
        return event && { event, cursor: event.revision };
      },
      ...this.recovery(options.name),
    };
    return this.register(source);
  }

  subscribeToAll(options: AllSubscriptionOptions = {}): Subscription {
    const from = allSubscriptionStart(options);
    this.ensureOpen();
    const filter = options.filter;
    const keep = (e: RecordedEvent) => !isSystem(e.streamId, e.type) && matchesFilter(e.streamId, e.type, filter);
    const source: CatchUpSource = {
      start:
        from === "start" ? Promise.resolve(-1n) : from === "end" ? this.resolveStart(this.rawHead()) : Promise.resolve(from > MAX_INT64 ? MAX_INT64 : from),
      head: () => this.rawHead(),
      readAfter: async (cursor) => {
        const page = await this.readAllPage(cursor < 0n ? START : toClientPosition(cursor), FORWARDS, PAGE_SIZE);
        const events: RecordedEvent[] = [];
        let last = cursor;
        for (const raw of page) {
          const event = toRecordedEvent(raw);
          if (!event || event.position <= last) continue;
          last = event.position;
          if (keep(event)) events.push(event);
        }
        return { events, cursor: last, atEnd: page.length < PAGE_SIZE };
      },
      subscribeAfter: (cursor) =>
        this.client.subscribeToAll({
          fromPosition: cursor < 0n ? START : toClientPosition(cursor),
          filter: serverFilter(filter),
          ...this.callOptions(),
        }) as unknown as LiveSubscription,
      convert: (item) => {
        const event = toRecordedEvent(item as AllStreamResolvedEvent);
        if (!event || event.position < 0n) return undefined;
        return { event: keep(event) ? event : undefined, cursor: event.position };
      },
      ...this.recovery(options.name),
    };
    return this.register(source);
  }

  /** What every subscription shares: error mapping, what counts as a drop, where it reports. */
  private recovery(name: string | undefined): Pick<CatchUpSource, "mapError" | "isTransient" | "onDrop" | "onConfirmed" | "health"> {
    return {
      mapError: (error) => this.mapError(error),
      isTransient: (error) => error instanceof StoreUnavailableError && !this.closed,
      onDrop: (error) => this.health.unreachable(error),
      onConfirmed: () => this.health.reached(),
      health: this.health.subscription(name),
    };
  }

  /** Options every call takes: the leader requirement, and a deadline when the caller has one. */
  private callOptions(deadline?: number): { requiresLeader?: boolean; deadline?: number } {
    return {
      ...(this.requiresLeader ? { requiresLeader: true } : {}),
      ...(deadline === undefined ? {} : { deadline: Math.max(1, Math.ceil(deadline)) }),
    };
  }

  private resolveStart(start: Promise<bigint>): Promise<bigint> {
    const tracked = this.track(start);
    this.pendingStarts.add(tracked);
    const forget = () => this.pendingStarts.delete(tracked);
    tracked.then(forget, forget);
    return tracked;
  }

  private register(source: CatchUpSource): Subscription {
    const subscription = new EsdbCatchUpSubscription(source, (s) => this.subscriptions.delete(s));
    this.subscriptions.add(subscription);
    return subscription;
  }

  /**
   * Deletes each stream (a soft delete: EventStoreDB removes the events at its next scavenge; a
   * later append starts the stream again after its last revision). A missing stream is no error.
   */
  async purgeStreams(streams: readonly string[]): Promise<void> {
    this.ensureOpen();
    const deleteOne = async (stream: string) => {
      try {
        await this.client.deleteStream(stream, { expectedRevision: ANY, ...this.callOptions() });
        this.health.reached();
      } catch (error) {
        if (error instanceof StreamNotFoundError) return;
        throw this.mapError(error);
      }
    };
    await this.track(this.retrying("a stream delete", () => Promise.all(streams.map(deleteOne))));
  }

  // ------------------------------------------------------------------------------------------------- closing

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.allSettled([...this.subscriptions].map((s) => s.close()));
    await Promise.allSettled([...this.inFlight]);
    await this.client.dispose().catch(() => undefined);
  }

  private ensureOpen(): void {
    if (this.closed) throw new StoreUnavailableError(`EventStoreDB store for ${redactConnectionString(this.connectionString)} is closed`);
  }

  private track<T>(operation: Promise<T>): Promise<T> {
    this.inFlight.add(operation);
    const forget = () => this.inFlight.delete(operation);
    operation.then(forget, forget);
    return operation;
  }

  private mapError(error: unknown): unknown {
    const unavailable = toStoreUnavailable(error, this.connectionString);
    if (!unavailable) return error;
    if (!this.closed) this.health.unreachable(unavailable);
    return unavailable;
  }
}

/** All items of a finite client read (a Readable), collected from its events: cheaper than async iteration. */
function drain<T>(read: Readable): Promise<T[]> {
  return new Promise<T[]>((resolve, reject) => {
    const items: T[] = [];
    read.on("data", (item: T) => items.push(item));
    read.on("error", reject);
    read.once("end", () => resolve(items));
  });
}

/**
 * The server-side part of a `$all` subscription filter. EventStoreDB filters on stream name OR event type, by
 * prefixes or regex; exact event types and system exclusion are always (re)checked client-side.
 */
function serverFilter(filter: EventFilter | undefined): Filter {
  if (filter?.streamPrefixes && filter.streamPrefixes.length > 0) return streamNameFilter({ prefixes: filter.streamPrefixes });
  if (filter?.eventTypes && filter.eventTypes.length > 0) return eventTypeFilter({ prefixes: filter.eventTypes });
  return excludeSystemEvents();
}

/** A checked event as the client takes it: what the log stores (the client stringifies it), no empty metadata. */
function toPrepared(event: CheckedEvent): PreparedEvent {
  return { id: event.id, type: event.type, data: event.stored as JSONType, metadata: event.metadata };
}
