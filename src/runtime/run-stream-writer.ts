import type { EventData, EventStore } from "../eventstore/types.js";

/**
 * Appends a run's events to `run-{id}` in order, without making the graph wait for the disk:
 * events pushed while an append is in flight are batched into the next one (one transaction, one
 * fsync for many chunks). `drain()` resolves once everything pushed so far is durable.
 */
export class RunStreamWriter {
  private queue: EventData[] = [];
  private flushing: Promise<void> | undefined;
  /** First append failure; later pushes are dropped and `drain()` rejects with it. */
  private failure: unknown;
  /** Revision of the last event this writer appended (or learnt at claim time). */
  revision: bigint;

  constructor(
    private readonly store: EventStore,
    readonly stream: string,
    revision: bigint,
  ) {
    this.revision = revision;
  }

  push(event: EventData): void {
    if (this.failure) return;
    this.queue.push(event);
    this.flushing ??= this.flush();
  }

  private async flush(): Promise<void> {
    try {
      while (this.queue.length > 0 && !this.failure) {
        const batch = this.queue;
        this.queue = [];
        try {
          const result = await this.store.append(this.stream, batch, "any");
          this.revision = result.nextExpectedRevision;
        } catch (error) {
          this.failure = error;
        }
      }
    } finally {
      this.flushing = undefined;
    }
  }

  /**
   * Appends what is still queued plus `last` in one append with the expected revision (so a
   * concurrent writer, e.g. a cancel request, makes it fail with WrongExpectedVersion instead of
   * interleaving). Returns the revision of the last event.
   */
  async finish(last: EventData[]): Promise<bigint> {
    while (this.flushing) await this.flushing;
    if (this.failure) throw this.failure;
    const batch = [...this.queue.splice(0), ...last];
    try {
      const result = await this.store.append(this.stream, batch, this.revision);
      this.revision = result.nextExpectedRevision;
      return this.revision;
    } catch (error) {
      // Put the outputs back so a retry (after re-reading the stream) can still write them.
      this.queue = batch.slice(0, batch.length - last.length);
      throw error;
    }
  }

  async drain(): Promise<void> {
    while (this.flushing) await this.flushing;
    if (this.failure) throw this.failure;
  }
}
