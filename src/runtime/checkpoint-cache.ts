import { evolveCheckpoints, pmapEntries, stateFromSnapshot, type SnapshotContent, type ThreadCheckpoints } from "../../projections/checkpoints.js";
import { checkpointStream, threadIdOfCheckpointStream, type CheckpointEvent } from "../domain/checkpoint-events.js";
import { isEvent, type TypedEvent } from "../domain/event-of.js";
import { getLargeJson } from "../eventstore/chunked-append.js";
import { InvalidEventError, type EventStore, type RecordedEvent } from "../eventstore/types.js";
import { describeError } from "../read-models/quarantine.js";

/** An event of one `checkpoints-{thread}` stream with the revision it has there. */
export interface RevisionedEvent {
  readonly revision: bigint;
  readonly type: string;
  readonly data: unknown;
  /** The data's length as JSON text, when the store reported it (AppendResult.dataLengths). */
  readonly dataLength?: number;
}

/** A live event of any stream, as the `$all` subscription delivers it. */
export interface ObservedEvent extends RevisionedEvent {
  readonly streamId: string;
}

interface Entry {
  state: ThreadCheckpoints | undefined;
  /** Revision of the last event folded into `state`; -1n = none (the stream was empty). */
  revision: bigint;
  /** Serialized size of what the state holds: the JSON of the events folded (and of the snapshot it started from). */
  bytes: number;
  /** CheckpointSaved events folded since the latest snapshot (or the start of the stream). */
  sinceSnapshot: number;
}

/** A thread's fold with the stream revision it stands for. */
export interface FoldedThread {
  readonly state: ThreadCheckpoints | undefined;
  readonly revision: bigint;
  readonly sinceSnapshot: number;
}

export interface ThreadCheckpointsCacheOptions {
  store: EventStore;
  /** How many threads' folded checkpoints are kept; the least recently used are dropped first. */
  maxThreads: number;
  /** Bytes (serialized size) the held threads may take together; least recently used dropped first. */
  maxBytes?: number;
}

/** Events of the first page when a miss reads a stream backwards (doubling per page, up to 512). */
const TAIL_FIRST_PAGE = 8;
/** Events per page of a full forward read. */
const FULL_PAGE = 1000;

function isStale(state: ThreadCheckpoints | undefined): boolean {
  return !!state?.partial && pmapEntries(state.namespaces).some(([, ns]) => ns.stale === true);
}

/** The serialized size an event adds to a thread's fold (computed once, when it is folded; the store's count when it gave one). */
function sizeOf(event: RevisionedEvent): number {
  return event.dataLength ?? JSON.stringify(event.data)?.length ?? 0;
}

/**
 * The checkpoint read model loaded like an aggregate: a thread's state is the pure fold of its own
 * stream, read on demand, and only the most recently used threads are kept, bounded both in number
 * and in bytes (a global projection would hold every thread ever run).
 *
 * A miss costs the thread's latest state, not its history: the stream is read BACKWARDS to its
 * latest `CheckpointsSnapshot` (or to a CheckpointsDeleted / CheckpointsCopied, which reset the
 * fold, or to its start), the snapshot's content is loaded, and the few events after it are folded
 * onto it. Such a state is `partial`: it answers reads of the latest checkpoints; the saver reads
 * the whole stream (`full`, not cached) for what it cannot answer (history, old checkpoints). Each entry remembers the stream revision it folded, so an
 * update is applied only when it is the next revision; anything else (another process appended
 * in between, or our own concurrent appends finished out of order) is a gap that is closed by
 * reading the stream from that revision on, never by trusting the entry.
 */
export class ThreadCheckpointsCache {
  private readonly store: EventStore;
  private readonly maxThreads: number;
  private readonly maxBytes: number;
  /** Sum of the held entries' bytes. */
  private heldBytes = 0;
  /** Least recently used first (Map iteration order is insertion order; a hit re-inserts). */
  private readonly entries = new Map<string, Entry>();
  /** One stream read per thread at a time; later callers share it. */
  private readonly loading = new Map<string, Promise<Entry>>();

  constructor(options: ThreadCheckpointsCacheOptions) {
    if (!Number.isInteger(options.maxThreads) || options.maxThreads < 1) {
      throw new Error(`ThreadCheckpointsCache: maxThreads must be a positive integer (got ${options.maxThreads})`);
    }
    const maxBytes = options.maxBytes ?? Infinity;
    if (!(maxBytes > 0)) throw new Error(`ThreadCheckpointsCache: maxBytes must be positive (got ${maxBytes})`);
    this.store = options.store;
    this.maxThreads = options.maxThreads;
    this.maxBytes = maxBytes;
  }

  /** Number of threads held. */
  get size(): number {
    return this.entries.size;
  }

  /** Bytes held (serialized size of the held threads' folds). */
  get bytes(): number {
    return this.heldBytes;
  }

  /** The held fold of a thread, without touching the LRU order (for snapshots and tests). */
  held(threadId: string): FoldedThread | undefined {
    return this.entries.get(threadId);
  }

  /**
   * The complete fold of the thread's stream from its start, read in pages and not kept: for
   * history reads (`list`) and decisions that need old checkpoints (copy, rollback). O(history).
   */
  async full(threadId: string): Promise<FoldedThread> {
    return this.fullEntry(threadId);
  }

  private async fullEntry(threadId: string): Promise<Entry> {
    const entry: Entry = { state: undefined, revision: -1n, bytes: 0, sinceSnapshot: 0 };
    for (;;) {
      const page = await this.store.readStream(checkpointStream(threadId), { fromRevision: entry.revision + 1n, maxCount: FULL_PAGE });
      if (!this.advance(threadId, entry, page)) throw new Error(`checkpoints-${threadId}: stream read with a gap after revision ${entry.revision}`);
      if (page.length < FULL_PAGE) return entry;
    }
  }

  /** Whether the thread's state is held (for tests and diagnostics; does not touch the LRU order). */
  has(threadId: string): boolean {
    return this.entries.has(threadId);
  }

  /**
   * The thread's checkpoints as of everything this process appended and saw appended; a miss
   * reads the stream's tail back to its latest snapshot (the state may then be `partial`). Appends by other processes show up once the `$all` subscription
   * delivers them (`observed`), as with any projection.
   */
  async get(threadId: string): Promise<ThreadCheckpoints | undefined> {
    const hit = this.cached(threadId);
    return hit ? hit.state : (await this.load(threadId)).state;
  }

  /** get's hit, without a promise: the held entry (now the most recently used), or undefined on a miss. */
  cached(threadId: string): FoldedThread | undefined {
    const hit = this.entries.get(threadId);
    if (hit) this.touch(threadId, hit);
    return hit;
  }

  /**
   * The thread's checkpoints including every event in its stream when called, whoever appended
   * it: for decisions (copy, rollback, the claim's base checkpoint). Costs one stream read.
   */
  async fresh(threadId: string): Promise<ThreadCheckpoints | undefined> {
    await this.loading.get(threadId)?.catch(() => undefined);
    const entry = this.entries.get(threadId);
    if (entry) {
      const caughtUp = await this.catchUp(threadId, entry);
      const held = this.entries.get(threadId) === entry;
      if (caughtUp) {
        if (held) this.touch(threadId, entry);
        return entry.state;
      }
      if (held) this.drop(threadId, entry);
    }
    return (await this.load(threadId)).state;
  }

  /**
   * The thread's state without making it resident: a cached entry when there is one, else a fold
   * of its stream that is not kept (a scan over many threads must not flush the working set).
   */
  async peek(threadId: string): Promise<ThreadCheckpoints | undefined> {
    const hit = this.entries.get(threadId);
    if (hit && !hit.state?.partial) return hit.state;
    return (await this.full(threadId)).state;
  }

  /**
   * Called after our own append of `events` (consecutive revisions) to the thread's stream has
   * been acknowledged; returns once a cached entry includes them. No entry: nothing to do, the
   * next read folds the stream, which now holds them.
   */
  appended(threadId: string, events: readonly RevisionedEvent[]): Promise<void> | undefined {
    // A load that read the stream before our append landed must not hide it.
    const loading = this.loading.get(threadId);
    if (loading) {
      const next = () => this.apply(threadId, events);
      return loading.then(next, next);
    }
    // The usual case (nothing loading, the entry one revision behind) takes no promise.
    return this.apply(threadId, events);
  }

  private apply(threadId: string, events: readonly RevisionedEvent[]): Promise<void> | undefined {
    const entry = this.entries.get(threadId);
    if (!entry) return undefined;
    if (this.advance(threadId, entry, events)) {
      this.enforceBounds();
      return undefined;
    }
    return this.catchUp(threadId, entry).then((caughtUp) => {
      if (!caughtUp) this.drop(threadId, entry);
      this.enforceBounds();
    });
  }

  /**
   * A live event from the `$all` subscription, possibly appended by another process. Applied when
   * it is the next revision of a held thread; after a gap the entry is dropped (the next read
   * reloads it) rather than served with a hole.
   */
  observed(event: ObservedEvent): void {
    const threadId = threadIdOfCheckpointStream(event.streamId);
    if (threadId === undefined) return;
    const pending = this.loading.get(threadId);
    if (pending) {
      // The read in flight may have missed it; look again once the entry exists.
      // (An event it cannot fold was reported when it first came: the thread is read again when asked for.)
      void pending
        .then(
          () => this.observed(event),
          () => undefined,
        )
        .catch(() => undefined);
      return;
    }
    const entry = this.entries.get(threadId);
    let advanced = true;
    try {
      if (entry) advanced = this.advance(threadId, entry, [event]);
    } catch (error) {
      // Not kept half folded: the next read of the thread folds its stream again (and names the event).
      this.drop(threadId, entry!);
      throw error;
    }
    if (entry && !advanced) this.drop(threadId, entry);
    this.enforceBounds();
  }

  private load(threadId: string): Promise<Entry> {
    let pending = this.loading.get(threadId);
    if (!pending) {
      pending = this.readTail(threadId)
        .then((entry) => this.install(threadId, entry))
        .finally(() => this.loading.delete(threadId));
      this.loading.set(threadId, pending);
    }
    return pending;
  }

  private install(threadId: string, loaded: Entry): Entry {
    const held = this.entries.get(threadId);
    // Only loads insert, one at a time per thread, so `held` is unexpected; keep the newer.
    const entry = held && held.revision >= loaded.revision ? held : loaded;
    if (held && held !== entry) this.drop(threadId, held);
    if (!held || held !== entry) this.heldBytes += entry.bytes;
    this.touch(threadId, entry);
    this.enforceBounds();
    return entry;
  }

  private touch(threadId: string, entry: Entry): void {
    this.entries.delete(threadId);
    this.entries.set(threadId, entry);
  }

  private drop(threadId: string, entry: Entry): void {
    if (this.entries.get(threadId) !== entry) return;
    this.entries.delete(threadId);
    this.heldBytes -= entry.bytes;
  }

  /** Drops least recently used threads until both bounds hold (a thread alone over maxBytes is not kept). */
  private enforceBounds(): void {
    while (this.entries.size > this.maxThreads || (this.heldBytes > this.maxBytes && this.entries.size > 0)) {
      const [oldest, entry] = this.entries.entries().next().value as [string, Entry];
      this.drop(oldest, entry);
    }
  }

  /**
   * A miss: reads the stream backwards to where a fold can start (its latest snapshot, a reset by
   * CheckpointsDeleted / CheckpointsCopied, or the start) and folds forward from there.
   */
  private async readTail(threadId: string): Promise<Entry> {
    const stream = checkpointStream(threadId);
    const newestFirst: RecordedEvent[] = [];
    let snapshot: (RecordedEvent & TypedEvent<"CheckpointsSnapshot">) | undefined;
    let from: bigint | "end" = "end";
    let pageSize = TAIL_FIRST_PAGE;
    scan: for (; ; pageSize = Math.min(pageSize * 2, 512)) {
      const page = await this.store.readStream(stream, { direction: "backwards", fromRevision: from, maxCount: pageSize });
      for (const event of page) {
        if (isEvent(event, "CheckpointsSnapshot")) {
          snapshot = event;
          break scan;
        }
        newestFirst.push(event);
        if (event.type === "CheckpointsDeleted" || event.type === "CheckpointsCopied") break scan;
      }
      const last = page[page.length - 1];
      if (page.length < pageSize || last.revision === 0n) break;
      from = last.revision - 1n;
    }
    const events = newestFirst.reverse();
    let entry: Entry = { state: undefined, revision: (events[0]?.revision ?? 0n) - 1n, bytes: 0, sinceSnapshot: 0 };
    if (snapshot) {
      const marker = snapshot.data;
      try {
        const content = (await getLargeJson(this.store, marker.ref)) as SnapshotContent;
        entry = { state: stateFromSnapshot(content), revision: snapshot.revision, bytes: marker.ref.bytes, sinceSnapshot: 0 };
      } catch {
        // The snapshot's content cannot be read: fold the whole stream instead (slower, same result).
        return this.fullEntry(threadId);
      }
    }
    if (!this.advance(threadId, entry, events)) throw new Error(`checkpoints-${threadId}: stream read with a gap after revision ${entry.revision}`);
    return entry;
  }

  /**
   * Reads what the stream holds after the entry's revision and folds it in. False when the entry
   * could not be brought up to date (the store returned a hole), so the caller must not use it.
   */
  private async catchUp(threadId: string, entry: Entry): Promise<boolean> {
    const events = await this.store.readStream(checkpointStream(threadId), { fromRevision: entry.revision + 1n });
    // Concurrent updates may have moved the entry meanwhile; `advance` skips what it already has.
    return this.advance(threadId, entry, events);
  }

  /**
   * Applies the events that extend the entry, in revision order, skipping those already folded.
   * False at the first gap (the entry keeps everything before it).
   */
  private advance(threadId: string, entry: Entry, events: readonly RevisionedEvent[]): boolean {
    for (const event of events) {
      if (event.revision <= entry.revision) continue;
      if (event.revision !== entry.revision + 1n) return false;
      // A partial state whose latest went stale (a rollback past its snapshot) is dropped at the
      // snapshot written after the rollback: reloading from there is cheaper than full reads.
      if (event.type === "CheckpointsSnapshot" && isStale(entry.state)) return false;
      try {
        entry.state = evolveCheckpoints(entry.state, { type: event.type, data: event.data } as CheckpointEvent, threadId);
      } catch (error) {
        // A clear error for this one thread (its event that cannot be folded), never a stray TypeError.
        const position = (event as { position?: unknown }).position;
        throw new InvalidEventError(
          checkpointStream(threadId),
          event.revision,
          event.type,
          `cannot be folded: ${describeError(error)}`,
          typeof position === "bigint" ? position : undefined,
        );
      }
      entry.revision = event.revision;
      const bytes = sizeOf(event);
      entry.bytes += bytes;
      if (this.entries.get(threadId) === entry) this.heldBytes += bytes;
      if (event.type === "CheckpointSaved") entry.sinceSnapshot += 1;
      else if (event.type !== "PendingWritesSaved" && event.type !== "CheckpointsDiscarded") entry.sinceSnapshot = 0;
    }
    return true;
  }
}
