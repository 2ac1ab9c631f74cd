import type { RecordedEvent, Subscription, SubscriptionItem } from "./types.js";

/** One synchronous read of the log after a cursor. */
export interface Page {
  /** Matching events after the cursor, in log order; may be parsed as iterated (a bad row then throws in its turn). */
  events: Iterable<RecordedEvent>;
  /** Cursor of the last row examined (filtered-out rows count too); undefined when no row was found. */
  cursor: bigint | undefined;
  /** Fewer rows than a page were found: the read reached the head of the log. */
  atHead: boolean;
}

export interface CatchUpSource {
  /** Reads the next page strictly after `cursor`. */
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

/**
 * Catch-up subscription over a cursor (a stream revision or a global position; the start is exclusive):
 * replays history page by page, yields `caughtUp` once when a read reaches the head, then waits for
 * commits and reads on from its cursor. Reading by cursor from a log whose positions become visible
 * in order makes gaps and duplicates impossible, whatever the interleaving with appends.
 */
export class CatchUpSubscription implements Subscription {
  private closed = false;
  /** A relevant commit happened since the last read. */
  private dirty = false;
  private wake: (() => void) | undefined;
  private iterator: AsyncGenerator<SubscriptionItem> | undefined;
  private caughtUp = false;

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

  close(): Promise<void> {
    if (!this.closed) {
      this.closed = true;
      this.hub.remove(this);
      this.release();
    }
    return Promise.resolve();
  }

  [Symbol.asyncIterator](): AsyncIterator<SubscriptionItem> {
    return (this.iterator ??= this.run());
  }

  private release(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  private async *run(): AsyncGenerator<SubscriptionItem> {
    try {
      while (!this.closed) {
        this.dirty = false;
        const page = this.source.readAfter(this.cursor);
        for (const event of page.events) {
          yield { kind: "event", event };
          if (this.closed) return;
        }
        if (page.cursor !== undefined) this.cursor = page.cursor;
        if (!page.atHead) continue;
        if (!this.caughtUp && (this.source.historyReadable?.() ?? true)) {
          this.caughtUp = true;
          yield { kind: "caughtUp" };
        }
        if (!this.dirty && !this.closed) await new Promise<void>((resolve) => (this.wake = resolve));
      }
    } finally {
      await this.close();
    }
  }
}
