/**
 * The most recently committed events of the SQLite store, held in memory in log order, so that live
 * subscribers and reads of recent history get them without a query, and each event is parsed once per
 * process (on first use), however many readers it has.
 *
 * Invariant: every event whose position is greater than `coveredAfter` is held. It holds because the store
 * owns its file exclusively and adds every committed event here, in position order; evicting the oldest event
 * moves `coveredAfter` up to its position. A read that needs anything at or before `coveredAfter` is not
 * answered (undefined) and goes to the database.
 */
import { ownRecordedEvent } from "./sqlite-rows.js";
import type { RecordedEvent } from "./types.js";

export class CommittedEvent {
  private parsed: RecordedEvent | undefined;

  constructor(
    readonly position: bigint,
    readonly streamId: string,
    readonly revision: bigint,
    readonly id: string,
    readonly type: string,
    readonly data: string,
    readonly metadata: string | null,
    readonly created: number,
  ) {}

  /** The event, made on first use and shared by every reader (its data parsed when first read). */
  get event(): RecordedEvent {
    return (this.parsed ??= ownRecordedEvent(this));
  }

  get bytes(): number {
    return this.data.length + (this.metadata?.length ?? 0) + 64;
  }
}

export interface RecentEventsLimits {
  maxEvents: number;
  /** Bound on the JSON text held (parsed events take a small multiple of it). */
  maxBytes: number;
}

export class RecentEvents {
  /** Held events in position order; the live part starts at `start` (a queue without shifting on every eviction). */
  private log: CommittedEvent[] = [];
  private start = 0;
  private bytes = 0;
  /** The held events of each stream, in revision order (a suffix of the stream). */
  private readonly streams = new Map<string, CommittedEvent[]>();

  constructor(
    /** Every event after this position is held: at open, the head of the log. */
    private coveredAfter: bigint,
    private readonly limits: RecentEventsLimits,
  ) {}

  get size(): number {
    return this.log.length - this.start;
  }

  /** Adds committed events; must be called for every commit, in position order. */
  add(events: readonly CommittedEvent[]): void {
    for (const e of events) {
      this.log.push(e);
      this.bytes += e.bytes;
      const stream = this.streams.get(e.streamId);
      if (stream) stream.push(e);
      else this.streams.set(e.streamId, [e]);
    }
    while (this.size > 0 && (this.size > this.limits.maxEvents || this.bytes > this.limits.maxBytes)) this.evictOldest();
  }

  /** Events with a position greater than `cursor`, in order, at most `limit`; undefined when not all are held. */
  after(cursor: bigint, limit: number): CommittedEvent[] | undefined {
    if (cursor < this.coveredAfter) return undefined;
    let lo = this.start;
    let hi = this.log.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.log[mid].position <= cursor) lo = mid + 1;
      else hi = mid;
    }
    return this.log.slice(lo, lo + limit);
  }

  /**
   * The stream's last revision when any of its events is held (what is held of a stream ends at its last
   * event); undefined when none is, and only the database knows.
   */
  lastRevision(stream: string): bigint | undefined {
    const held = this.streams.get(stream);
    return held === undefined ? undefined : held[held.length - 1].revision;
  }

  /** Events of `stream` from revision `from` (inclusive), at most `limit`; undefined when not all are held. */
  streamFrom(stream: string, from: bigint, limit: number): CommittedEvent[] | undefined {
    const held = this.streams.get(stream);
    // Nothing held: the stream may have older events (or none at all); only the database knows.
    if (!held || held[0].revision > from) return undefined;
    const first = held.findIndex((e) => e.revision >= from);
    return first < 0 ? [] : held.slice(first, first + limit);
  }

  /**
   * Events of `stream` at or before revision `from`, newest first, at most `limit`; undefined when
   * not all are held. What is held of a stream is a suffix of it that ends at its last event.
   */
  streamBackwards(stream: string, from: bigint, limit: number): CommittedEvent[] | undefined {
    const held = this.streams.get(stream);
    if (!held) return undefined;
    let i = held.length - 1;
    while (i >= 0 && held[i].revision > from) i--;
    if (i < 0) return undefined; // all older than what is held
    const out: CommittedEvent[] = [];
    for (; i >= 0 && out.length < limit; i--) out.push(held[i]);
    // Fewer than asked for: only whole if the stream starts with what is held.
    if (out.length < limit && held[0].revision > 0n) return undefined;
    return out;
  }

  private evictOldest(): void {
    const e = this.log[this.start];
    this.start++;
    this.bytes -= e.bytes;
    this.coveredAfter = e.position;
    const stream = this.streams.get(e.streamId)!;
    stream.shift();
    if (stream.length === 0) this.streams.delete(e.streamId);
    if (this.start > 1024 && this.start * 2 > this.log.length) {
      this.log = this.log.slice(this.start);
      this.start = 0;
    }
  }
}
