import { evolveCheckpoints, type ThreadCheckpoints } from "../../projections/checkpoints.js";
import { checkpointStream, threadIdOfCheckpointStream, type CheckpointEvent } from "../domain/checkpoint-events.js";
import type { EventStore } from "../eventstore/types.js";

/** An event of one `checkpoints-{thread}` stream with the revision it has there. */
export interface RevisionedEvent {
  readonly revision: bigint;
  readonly type: string;
  readonly data: unknown;
}

/** A live event of any stream, as the `$all` subscription delivers it. */
export interface ObservedEvent extends RevisionedEvent {
  readonly streamId: string;
}

interface Entry {
  state: ThreadCheckpoints | undefined;
  /** Revision of the last event folded into `state`; -1n = none (the stream was empty). */
  revision: bigint;
}

export interface ThreadCheckpointsCacheOptions {
  store: EventStore;
  /** How many threads' folded checkpoints are kept; the least recently used are dropped first. */
  maxThreads: number;
}

/**
 * The checkpoint read model loaded like an aggregate: a thread's state is the pure fold of its own
 * stream, read on demand, and only the most recently used threads are kept (a global projection
 * would hold every thread ever run). Each entry remembers the stream revision it folded, so an
 * update is applied only when it is the next revision; anything else (another process appended
 * in between, or our own concurrent appends finished out of order) is a gap that is closed by
 * reading the stream from that revision on, never by trusting the entry.
 */
export class ThreadCheckpointsCache {
  private readonly store: EventStore;
  private readonly maxThreads: number;
  /** Least recently used first (Map iteration order is insertion order; a hit re-inserts). */
  private readonly entries = new Map<string, Entry>();
  /** One stream read per thread at a time; later callers share it. */
  private readonly loading = new Map<string, Promise<Entry>>();

  constructor(options: ThreadCheckpointsCacheOptions) {
    if (!Number.isInteger(options.maxThreads) || options.maxThreads < 1) {
      throw new Error(`ThreadCheckpointsCache: maxThreads must be a positive integer (got ${options.maxThreads})`);
    }
    this.store = options.store;
    this.maxThreads = options.maxThreads;
  }

  /** Number of threads held. */
  get size(): number {
    return this.entries.size;
  }

  /** Whether the thread's state is held (for tests and diagnostics; does not touch the LRU order). */
  has(threadId: string): boolean {
    return this.entries.has(threadId);
  }

  /**
   * The thread's checkpoints as of everything this process appended and saw appended; a miss
   * folds the whole stream. Appends by other processes show up once the `$all` subscription
   * delivers them (`observed`), as with any projection.
   */
  async get(threadId: string): Promise<ThreadCheckpoints | undefined> {
    const hit = this.entries.get(threadId);
    if (hit) {
      this.touch(threadId, hit);
      return hit.state;
    }
    return (await this.load(threadId)).state;
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
      if (held) this.entries.delete(threadId);
    }
    return (await this.load(threadId)).state;
  }

  /**
   * The thread's state without making it resident: a cached entry when there is one, else a fold
   * of its stream that is not kept (a scan over many threads must not flush the working set).
   */
  async peek(threadId: string): Promise<ThreadCheckpoints | undefined> {
    const hit = this.entries.get(threadId);
    if (hit) return hit.state;
    const pending = this.loading.get(threadId);
    if (pending) return (await pending).state;
    return (await this.readAndFold(threadId, -1n, undefined)).state;
  }

  /**
   * Called after our own append of `events` (consecutive revisions) to the thread's stream has
   * been acknowledged; returns once a cached entry includes them. No entry: nothing to do, the
   * next read folds the stream, which now holds them.
   */
  async appended(threadId: string, events: readonly RevisionedEvent[]): Promise<void> {
    // A load that read the stream before our append landed must not hide it.
    await this.loading.get(threadId)?.catch(() => undefined);
    const entry = this.entries.get(threadId);
    if (!entry || this.advance(threadId, entry, events)) return;
    if (!(await this.catchUp(threadId, entry)) && this.entries.get(threadId) === entry) this.entries.delete(threadId);
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
      void pending.then(
        () => this.observed(event),
        () => undefined,
      );
      return;
    }
    const entry = this.entries.get(threadId);
    if (entry && !this.advance(threadId, entry, [event])) this.entries.delete(threadId);
  }

  private load(threadId: string): Promise<Entry> {
    let pending = this.loading.get(threadId);
    if (!pending) {
      pending = this.readAndFold(threadId, -1n, undefined)
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
    this.touch(threadId, entry);
    while (this.entries.size > this.maxThreads) {
      const oldest = this.entries.keys().next().value as string;
      this.entries.delete(oldest);
    }
    return entry;
  }

  private touch(threadId: string, entry: Entry): void {
    this.entries.delete(threadId);
    this.entries.set(threadId, entry);
  }

  /** Folds the stream after `revision` onto `state`. */
  private async readAndFold(threadId: string, revision: bigint, state: ThreadCheckpoints | undefined): Promise<Entry> {
    const entry: Entry = { state, revision };
    const events = await this.store.readStream(checkpointStream(threadId), { fromRevision: revision + 1n });
    if (!this.advance(threadId, entry, events)) throw new Error(`checkpoints-${threadId}: stream read with a gap after revision ${revision}`);
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
      entry.state = evolveCheckpoints(entry.state, { type: event.type, data: event.data } as CheckpointEvent, threadId);
      entry.revision = event.revision;
    }
    return true;
  }
}
