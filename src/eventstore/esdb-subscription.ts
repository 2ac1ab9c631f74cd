/**
 * Catch-up subscriptions over EventStoreDB that do not depend on the server's own catch-up signalling
 * (servers before 23.10 never send `caughtUp`):
 *
 * 1. history: read pages (readStream / readAll) strictly after the cursor, up to the head seen when iteration
 *    starts (or until a short page), yielding each event and moving the cursor;
 * 2. `caughtUp`, exactly once;
 * 3. live: a server subscription started from the cursor (EXCLUSIVE start), deduplicated by cursor.
 *
 * The server subscription starts where history ended, so nothing is skipped, and the cursor filter drops
 * anything at or before it, so nothing is delivered twice.
 *
 * A consumer that does not keep up costs at most ESDB_LIVE_BUFFER_EVENTS live events: past that, the
 * subscription drops what it buffered, ends the server subscription and goes back to step 1 from its cursor
 * (without a second `caughtUp`), reading pages only as the consumer pulls them, then goes live again.
 *
 * A drop (connection lost, leader change, the server ending the subscription) is not the consumer's
 * problem: after a backoff (capped, jittered) the subscription goes back to step 1 from its cursor,
 * the position of the last event it delivered (exclusive), until it succeeds or is closed. Only a
 * failure that cannot go away by itself ends the iteration with an error.
 */
import type { Readable } from "node:stream";
import { StoreUnavailableError, type Subscription, type SubscriptionItem, type RecordedEvent } from "./types.js";
import { backoffDelay, RESUBSCRIBE_BACKOFF, type BackoffPolicy } from "./backoff.js";
import type { SubscriptionHealth } from "./log-health.js";
import { ESDB_LIVE_BUFFER_EVENTS, subscriptionBuffers, type BufferedAmount } from "./subscription-buffers.js";

/** How one subscription reads its source. Cursors: a stream revision or a global position; -1n = before everything. */
export interface CatchUpSource {
  /** The cursor to start after, resolved once ("end" needs a read). */
  start: Promise<bigint>;
  /** The current head cursor (-1n when empty): history stops there. */
  head(): Promise<bigint>;
  /**
   * Events strictly after `cursor`, at most about one page, in order. `cursor` is the last cursor examined
   * (events filtered out count too); `atEnd` when the read found fewer than a page.
   */
  readAfter(cursor: bigint): Promise<{ events: RecordedEvent[]; cursor: bigint; atEnd: boolean }>;
  /** Starts the server subscription strictly after `cursor`. Items are raw client items. */
  subscribeAfter(cursor: bigint): LiveSubscription;
  /** Converts a raw live item: the event and its cursor, the event undefined when filtered out. */
  convert(item: unknown): { event: RecordedEvent | undefined; cursor: bigint } | undefined;
  /** Maps errors (connectivity → StoreUnavailableError). */
  mapError(error: unknown): unknown;
  /** Whether a (mapped) failure may go away by itself: then the subscription re-subscribes. */
  isTransient(error: unknown): boolean;
  /** Told of each drop and of each confirmed (re-)subscription: the store's connection health. */
  onDrop?(error: unknown): void;
  onConfirmed?(): void;
  /** Where this subscription reports its state. */
  health?: SubscriptionHealth;
  /** Backoff between re-subscriptions; default RESUBSCRIBE_BACKOFF. */
  backoff?: BackoffPolicy;
}

/** What the client's StreamSubscription / AllStreamSubscription offers (it emits "confirmation" once the server accepted it). */
export interface LiveSubscription extends Readable {
  unsubscribe(): Promise<void>;
}

/**
 * A pull queue over a client subscription, bounded: an item beyond `limit` makes it drop what it holds
 * and say `behind` (the subscription then reads the log from its cursor). Pausing the Readable instead
 * would leave the transport and the server holding the backlog.
 */
class LiveFeed {
  private readonly buffer: unknown[] = [];
  private waiter: (() => void) | undefined;
  private ended = false;
  private behind = false;
  private failure: { error: unknown } | undefined;

  constructor(
    private readonly source: LiveSubscription,
    private readonly limit: number,
    private readonly onBehind: () => void,
  ) {
    source.on("data", (item: unknown) => {
      if (this.behind) return;
      if (this.buffer.length >= this.limit) {
        this.fallBehind();
        return;
      }
      this.buffer.push(item);
      subscriptionBuffers.add(1);
      this.wake();
    });
    source.on("error", (error: unknown) => {
      this.failure ??= { error };
      this.wake();
    });
    source.on("end", () => this.end());
    source.on("close", () => this.end());
  }

  end(): void {
    this.ended = true;
    this.wake();
  }

  /** Lets go of what it holds (also when the subscription stops with items not taken). */
  drop(): void {
    subscriptionBuffers.remove(this.buffer.length);
    this.buffer.length = 0;
  }

  private fallBehind(): void {
    this.behind = true;
    this.drop();
    this.source.pause();
    subscriptionBuffers.behind();
    this.onBehind();
    this.wake();
  }

  get buffered(): number {
    return this.buffer.length;
  }

  private wake(): void {
    const w = this.waiter;
    this.waiter = undefined;
    w?.();
  }

  /**
   * The next raw item; `done` when the feed ended; `behind` when it dropped its items for want of a consumer
   * (the items after the last one taken must be read from the log); throws the source's error after the buffered items.
   */
  async next(): Promise<{ done: false; item: unknown } | { done: true } | { behind: true }> {
    for (;;) {
      if (this.behind) return { behind: true };
      if (this.buffer.length > 0) {
        const item = this.buffer.shift();
        subscriptionBuffers.remove(1);
        return { done: false, item };
      }
      if (this.failure) throw this.failure.error;
      if (this.ended) return { done: true };
      await new Promise<void>((resolve) => (this.waiter = resolve));
    }
  }
}

export class EsdbCatchUpSubscription implements Subscription {
  private closed = false;
  private closedSignal!: () => void;
  private readonly whenClosed = new Promise<void>((resolve) => (this.closedSignal = resolve));
  private live: LiveSubscription | undefined;
  private feed: LiveFeed | undefined;
  private iterator: AsyncGenerator<SubscriptionItem> | undefined;
  /** Events of the history page in hand not yet delivered. */
  private pageHeld = 0;

  constructor(
    private readonly source: CatchUpSource,
    private readonly onClose: (s: EsdbCatchUpSubscription) => void,
  ) {
    // `start` may reject (server unreachable): the rejection belongs to the iteration, not to an unhandled promise.
    source.start.catch(() => undefined);
  }

  [Symbol.asyncIterator](): AsyncIterator<SubscriptionItem> {
    return (this.iterator ??= this.run());
  }

  /** What this subscription holds that its consumer has not taken: one history page, or at most ESDB_LIVE_BUFFER_EVENTS live events. */
  get buffered(): BufferedAmount {
    return { events: this.pageHeld + (this.feed?.buffered ?? 0) };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.closedSignal();
    this.onClose(this);
    this.source.health?.closed();
    this.feed?.end();
    this.feed?.drop();
    await this.stopLive();
  }

  private async stopLive(): Promise<void> {
    const live = this.live;
    this.live = undefined;
    if (live) await live.unsubscribe().catch(() => undefined);
  }

  /** Awaits `p` unless the subscription closes first (then undefined). */
  private async unlessClosed<T>(p: Promise<T>): Promise<T | undefined> {
    if (this.closed) return undefined;
    const closed = this.whenClosed.then(() => undefined);
    return Promise.race([p, closed]);
  }

  private async *run(): AsyncGenerator<SubscriptionItem> {
    try {
      yield* this.iterate();
    } catch (error) {
      if (this.closed) return;
      const failure = this.source.mapError(error);
      if (this.source.health) {
        this.source.health.state = "stopped";
        this.source.health.lastError = (failure as Error).message;
      }
      throw failure;
    } finally {
      await this.close();
    }
  }

  /** Delivers from the start point on, re-subscribing after each transient drop from the cursor reached. */
  private async *iterate(): AsyncGenerator<SubscriptionItem> {
    const state: { cursor: bigint | undefined; caughtUpSent: boolean; attempt: number } = { cursor: undefined, caughtUpSent: false, attempt: 0 };
    const health = this.source.health;
    for (;;) {
      try {
        // Fallen behind: read on from the cursor at once (not a drop: no backoff, nothing to report).
        if ((yield* this.deliver(state)) === "behind") continue;
        return;
      } catch (error) {
        if (this.closed) return;
        const failure = this.source.mapError(error);
        if (!this.source.isTransient(failure)) throw failure;
        await this.stopLive();
        this.feed?.drop();
        this.feed = undefined;
        this.source.onDrop?.(failure);
        if (health) {
          health.state = "reconnecting";
          health.lastError = (failure as Error).message;
          health.buffered = 0;
        }
        const delay = backoffDelay(state.attempt++, this.source.backoff ?? RESUBSCRIBE_BACKOFF);
        const waited = await this.unlessClosed(new Promise<true>((resolve) => setTimeout(() => resolve(true), delay).unref()));
        if (waited === undefined) return;
        if (health) health.resubscribes++;
      }
    }
  }

  /** One connection's worth: history after the cursor, `caughtUp` (the first time only), then live. */
  private async *deliver(state: {
    cursor: bigint | undefined;
    caughtUpSent: boolean;
    attempt: number;
  }): AsyncGenerator<SubscriptionItem, "behind" | undefined> {
    const health = this.source.health;
    if (state.cursor === undefined) {
      // "end" resolved when the subscription was made; if that failed, the head now is the start.
      const start = await this.unlessClosed(state.attempt === 0 ? this.source.start : this.source.head());
      if (start === undefined) return;
      state.cursor = start;
    }
    let cursor: bigint = state.cursor;
    const advance = (to: bigint) => {
      cursor = to;
      state.cursor = to;
      if (health) health.position = to;
    };

    // 1. History up to the head seen now.
    const head = await this.unlessClosed(this.source.head());
    if (head === undefined) return;
    while (cursor < head) {
      const page = await this.unlessClosed(this.source.readAfter(cursor));
      if (page === undefined) return;
      // A page is read whole before any of it is delivered: a drop cannot fall inside it.
      this.pageHeld = page.events.length;
      subscriptionBuffers.add(this.pageHeld);
      try {
        for (const event of page.events) {
          this.pageHeld--;
          subscriptionBuffers.remove(1);
          yield { kind: "event", event };
          if (this.closed) return;
        }
      } finally {
        subscriptionBuffers.remove(this.pageHeld);
        this.pageHeld = 0;
      }
      if (page.cursor <= cursor) break; // nothing more to read
      advance(page.cursor);
      if (page.atEnd) break;
    }

    // 2. Once.
    if (!state.caughtUpSent) {
      state.caughtUpSent = true;
      yield { kind: "caughtUp" };
      if (this.closed) return;
    }

    // 3. Live, strictly after the cursor.
    const live = this.source.subscribeAfter(cursor);
    this.live = live;
    // Fallen behind, the server subscription ends at once: what it would send is read from the log later.
    const feed = new LiveFeed(live, ESDB_LIVE_BUFFER_EVENTS, () => void this.stopLive());
    this.feed = feed;
    live.once("confirmation", () => {
      state.attempt = 0;
      if (health) health.state = "live";
      this.source.onConfirmed?.();
    });
    if (this.closed) {
      await this.stopLive();
      return;
    }
    for (;;) {
      const next = await feed.next();
      if (this.closed) return;
      if (health) health.buffered = feed.buffered;
      if ("behind" in next) {
        this.feed = undefined;
        return "behind";
      }
      if (next.done) throw new StoreUnavailableError("EventStoreDB ended the subscription");
      const converted = this.source.convert(next.item);
      if (!converted || converted.cursor <= cursor) continue;
      advance(converted.cursor);
      if (converted.event) {
        yield { kind: "event", event: converted.event };
        if (this.closed) return;
      }
    }
  }
}
