import type { RecordedEvent, Subscription, SubscriptionItem } from "./types.js";
import { subscriptionBuffers, type BufferedAmount } from "./subscription-buffers.js";

/** One synchronous read of the log after a cursor. */
export interface Page {
  /** Matching events after the cursor, in log order; may be parsed as iterated (a bad row then throws in its turn). */
  events: Iterable<RecordedEvent>;
  /** Cursor of the last row examined (filtered-out rows count too); undefined when no row was found. */
  cursor: bigint | undefined;
  /** Fewer rows than a page were found: the read reached the head of the log. */
  atHead: boolean;
  /** How many events `events` yields, and the JSON text the page holds for them until it is done (for `buffered`). */
  count?: number;
  bytes?: number;
}

export interface CatchUpSource {
  /** Reads the next page strictly after `cursor`, within SUBSCRIPTION_BUFFER. */
  readAfter(cursor: bigint): Page;
  /** Whether a commit that touched these streams may hold events for this subscription. */
  concerns(touched: ReadonlySet<string>): boolean;
  /**
   * Whether everything committed before the subscription began is readable (durable) by now: until then a read at
   * the head is not yet caught up. Default: always.
   */
  historyReadable?(): boolean;
}

/** In-process notifier: the store calls `notify` after each commit; subscriptions wait on it, never on timers. */
export class CommitHub {
  private readonly subscriptions = new Set<CatchUpSubscription>();

  add(subscription: CatchUpSubscription): void {
    this.subscriptions.add(subscription);
  }

  remove(subscription: CatchUpSubscription): void {
    this.subscriptions.delete(subscription);
  }

  notify(touched: ReadonlySet<string>): void {
    for (const subscription of this.subscriptions) subscription.onCommit(touched);
  }

  closeAll(): void {
    for (const subscription of [...this.subscriptions]) void subscription.close();
  }

  get size(): number {
    return this.subscriptions.size;
  }
}

/** What `step` answers when nothing can be delivered until the next relevant commit (or close). */
const WAIT = Symbol("wait");
const DONE: IteratorReturnResult<undefined> = Object.freeze({ done: true, value: undefined });

/**
 * Catch-up subscription over a cursor (a stream revision or a global position; the start is exclusive):
 * replays history page by page, yields `caughtUp` once when a read reaches the head, then waits for
 * commits and reads on from its cursor. Reading by cursor from a log whose positions become visible
 * in order makes gaps and duplicates impossible, whatever the interleaving with appends.
 *
 * Live events are read from the log too, only when the consumer pulls: a commit just marks the
 * subscription dirty. So a consumer that stops pulling holds at most the page in hand, never a queue.
 *
 * Its own async iterator, a small state machine rather than an async generator: an item already read
 * costs the consumer one promise, where a generator's yield costs three (every event of the read models,
 * the webhooks and each SSE tail goes through here). Like a generator's, `next` calls are answered in
 * order, an error ends the iteration (after it is thrown to the consumer), and `return` closes.
 */
export class CatchUpSubscription implements Subscription, AsyncIterator<SubscriptionItem> {
  private closed = false;
  /** A relevant commit happened since the last read. */
  private dirty = false;
  private caughtUp = false;
  /** read: the next step reads a page; events: delivering `page`; idle: at the head, waiting unless dirty. */
  private state: "read" | "events" | "idle" = "read";
  private page: Page | undefined;
  private events: Iterator<RecordedEvent> | undefined;
  /** `next` calls waiting for a commit, answered in order. */
  private readonly waiting: { resolve: (result: IteratorResult<SubscriptionItem>) => void; reject: (error: unknown) => void }[] = [];
  private pumpQueued = false;
  /** What the page in hand still holds for the consumer (see `buffered`). */
  private heldEvents = 0;
  private heldBytes = 0;

  constructor(
    private readonly source: CatchUpSource,
    private cursor: bigint,
    private readonly hub: CommitHub,
  ) {
    hub.add(this);
  }

  onCommit(touched: ReadonlySet<string>): void {
    // Before catching up, any commit may be the one that makes the history readable.
    if (this.closed || (this.caughtUp && !this.source.concerns(touched))) return;
    this.dirty = true;
    this.release();
  }

  /** What this subscription holds that its consumer has not taken: at most one page. */
  get buffered(): BufferedAmount {
    return { events: this.heldEvents, bytes: this.heldBytes };
  }

  close(): Promise<void> {
    if (!this.closed) {
      this.closed = true;
      this.hub.remove(this);
      this.page = undefined;
      this.events = undefined;
      this.letGo();
      this.release();
    }
    return Promise.resolve();
  }

  [Symbol.asyncIterator](): AsyncIterator<SubscriptionItem> {
    return this;
  }

  next(): Promise<IteratorResult<SubscriptionItem>> {
    if (this.waiting.length === 0) {
      let result: IteratorResult<SubscriptionItem> | typeof WAIT;
      try {
        result = this.step();
      } catch (error) {
        return Promise.reject(error);
      }
      if (result !== WAIT) return Promise.resolve(result);
    }
    return new Promise((resolve, reject) => this.waiting.push({ resolve, reject }));
  }

  return(): Promise<IteratorResult<SubscriptionItem>> {
    void this.close();
    return Promise.resolve(DONE);
  }

  /** Answers the waiting `next` calls, in a later microtask (as a generator resumes): never inside a commit's notify. */
  private release(): void {
    if (this.waiting.length === 0 || this.pumpQueued) return;
    this.pumpQueued = true;
    queueMicrotask(() => {
      this.pumpQueued = false;
      while (this.waiting.length > 0) {
        let result: IteratorResult<SubscriptionItem> | typeof WAIT;
        try {
          result = this.step();
        } catch (error) {
          this.waiting.shift()!.reject(error);
          continue;
        }
        if (result === WAIT) return;
        this.waiting.shift()!.resolve(result);
      }
    });
  }

  /** Lets go of what the page held. */
  private letGo(): void {
    subscriptionBuffers.remove(this.heldEvents, this.heldBytes);
    this.heldEvents = 0;
    this.heldBytes = 0;
  }

  /** The next item, DONE once closed, or WAIT. A read or a row that fails throws, once: the subscription is then closed. */
  private step(): IteratorResult<SubscriptionItem> | typeof WAIT {
    try {
      for (;;) {
        if (this.closed) return DONE;
        if (this.state === "read") {
          this.dirty = false;
          this.page = this.source.readAfter(this.cursor);
          this.events = this.page.events[Symbol.iterator]();
          this.heldEvents = this.page.count ?? 0;
          this.heldBytes = this.page.bytes ?? 0;
          subscriptionBuffers.add(this.heldEvents, this.heldBytes);
          this.state = "events";
        }
        if (this.state === "events") {
          const next = this.events!.next();
          if (!next.done) {
            if (this.heldEvents > 0) {
              this.heldEvents--;
              subscriptionBuffers.remove(1);
            }
            return { done: false, value: { kind: "event", event: next.value } };
          }
          const page = this.page!;
          this.page = undefined;
          this.events = undefined;
          this.letGo();
          if (page.cursor !== undefined) this.cursor = page.cursor;
          if (!page.atHead) {
            this.state = "read";
            continue;
          }
          this.state = "idle";
          if (!this.caughtUp && (this.source.historyReadable?.() ?? true)) {
            this.caughtUp = true;
            return { done: false, value: { kind: "caughtUp" } };
          }
        }
        if (!this.dirty) return WAIT;
        this.state = "read";
      }
    } catch (error) {
      void this.close();
      throw error;
    }
  }
}
