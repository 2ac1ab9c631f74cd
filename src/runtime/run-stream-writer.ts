import { AppendTicket, AppendTooLargeError, type AppendOptions, type EventData } from "../eventstore/types.js";
import type { CommandPipeline } from "../commands/pipeline.js";
import { APPEND_BUDGET, planBatches, sizeOfEvent } from "../eventstore/chunked-append.js";

/**
 * Appends a run's events to `run-{id}` in order, without making the graph wait for the disk:
 * events pushed while an append is in flight are batched into the next one (one transaction, one
 * fsync for many chunks). `drain()` resolves once everything pushed so far is durable.
 *
 * A batch over the store's append limit (1 MiB) is written in several appends, each with the
 * revision the previous one left; an event too large on its own is first shrunk by `shrink`
 * (which writes its payload beside the run and keeps a reference). Sizes are only computed after
 * the store refused a batch, so ordinary runs pay nothing for it.
 */
export class RunStreamWriter {
  private queue: EventData[] = [];
  /** Whether a batch is being written: the queue is then taken up again when it is done. */
  private writing = false;
  /** Callers waiting for the writer to have nothing queued and nothing in flight (see drain). */
  private idleWaiters: (() => void)[] = [];
  /** The append in flight: its ticket, how many events it writes, the revision it expects to follow. */
  private inFlight: { ticket: AppendTicket; count: number; base: bigint } | undefined;
  /** First append failure; later pushes are dropped and `drain()` rejects with it. */
  private failure: unknown;
  /** Revision of the last event this writer appended (or learnt at claim time). */
  revision: bigint;
  /** The revision each event pushed here with `tracked` was written at (see revisionOf). */
  private readonly revisions = new WeakMap<EventData, bigint>();
  /** Events whose revision is to be remembered once written: a run's tokens are not, so they cost no entry here. */
  private readonly tracked = new WeakSet<EventData>();

  constructor(
    private readonly commands: CommandPipeline,
    readonly stream: string,
    revision: bigint,
    private readonly shrink: (event: EventData) => Promise<EventData> = async (event) => event,
  ) {
    this.revision = revision;
  }

  /** `tracked`: remember the revision `event` is written at, for revisionOf. */
  push(event: EventData, tracked = false): void {
    if (this.failure) return;
    if (tracked) this.tracked.add(event);
    this.queue.push(event);
    if (!this.writing) this.writeNext();
  }

  /**
   * Writes what is queued as one batch, then the next: a chain of the store's promises with one callback
   * each, not an async loop (a run's every token comes through here, often one per batch).
   */
  private writeNext(): void {
    if (this.queue.length === 0 || this.failure) {
      this.writing = false;
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      for (const resolve of waiters) resolve();
      return;
    }
    this.writing = true;
    const batch = this.queue;
    this.queue = [];
    const inFlight = { ticket: new AppendTicket(), count: batch.length, base: this.revision };
    this.inFlight = inFlight;
    const settled = (error?: unknown) => {
      if (error !== undefined) this.failure = error;
      if (this.inFlight === inFlight) this.inFlight = undefined;
      this.writeNext();
    };
    this.commands.append({ stream: this.stream, events: batch, expected: "any", ticket: inFlight.ticket }).then(
      (result) => {
        this.written(batch, result.nextExpectedRevision);
        settled();
      },
      (error: unknown) => {
        if (!this.tooLarge(error)) return settled(error ?? new Error("append failed"));
        this.appendInParts(batch, false, { ticket: inFlight.ticket }).then(
          () => settled(),
          (e: unknown) => settled(e ?? new Error("append failed")),
        );
      },
    );
  }

  /** Resolves once nothing is queued or in flight (or the writer failed). */
  private async whenIdle(): Promise<void> {
    while (this.writing) await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
  }

  /** One append; when the store refuses it as too large, shrunk events in several appends. */
  private async append(batch: EventData[], checked: boolean, options?: AppendOptions): Promise<void> {
    try {
      const result = await this.commands.append({ stream: this.stream, events: batch, expected: checked ? this.revision : "any", ...options });
      this.written(batch, result.nextExpectedRevision);
      return;
    } catch (error) {
      if (!this.tooLarge(error)) throw error;
    }
    await this.appendInParts(batch, checked, options);
  }

  /** `batch`, refused as too large in one append: its large events shrunk, in several appends. */
  private async appendInParts(batch: EventData[], checked: boolean, options?: AppendOptions): Promise<void> {
    const shrunk: EventData[] = [];
    for (const event of batch) shrunk.push(sizeOfEvent(event) > APPEND_BUDGET / 4 ? await this.shrink(event) : event);
    // The parts are appends of their own (the ticket told of the refused whole), each still written
    // only if what the whole depended on was (a run's end never goes in without its checkpoint writes).
    const parts: AppendOptions = { urgent: options?.urgent, ...(options?.after ? { after: options.after } : {}) };
    let done = 0;
    for (const group of planBatches(this.stream, shrunk)) {
      // Each part expects the revision the previous part left, so nothing interleaves unnoticed.
      const result = await this.commands.append({ stream: this.stream, events: group, expected: checked ? this.revision : "any", ...parts });
      this.written(batch.slice(done, done + group.length), result.nextExpectedRevision);
      done += group.length;
    }
  }

  /**
   * Appends what is still queued plus `last` with the expected revision (so a concurrent writer,
   * e.g. a cancel request, makes it fail with WrongExpectedVersion instead of interleaving).
   * Returns the revision of the last event. `options`: e.g. urgent, for the append that ends a run;
   * its `ticket` tells of the first attempt, which may be refused (too large with the outputs still
   * queued) though the events are then written after them.
   */
  async finish(last: EventData[], options: AppendOptions = {}): Promise<bigint> {
    if (this.failure) throw this.failure;
    const inFlight = this.inFlight;
    if (inFlight && inFlight.ticket.state !== "failed") {
      // Without waiting for the append in flight: written after it, in its transaction where the store
      // can, and only if it is (a run's outputs and its end in one commit).
      const rest = this.queue.splice(0);
      try {
        const events = [...rest, ...last];
        const result = await this.commands.append({
          stream: this.stream,
          events,
          expected: inFlight.base + BigInt(inFlight.count),
          ...options,
          after: [...(options.after ?? []), inFlight.ticket],
        });
        this.written(events, result.nextExpectedRevision);
        return this.revision;
      } catch (error) {
        // The outputs go out on their own (drain() waits for them), whatever becomes of the end.
        this.queue = [...rest, ...this.queue];
        if (this.queue.length > 0 && !this.failure && !this.writing) this.writeNext();
        // Refused as it was (too large: the writer writes it in parts) or at all: as below, once it is settled.
        // So too when this append alone is too large (a burst of outputs the graph pushed faster than
        // the log took them, queued behind a small append): thrown, the end would race the outputs
        // still being written, and they could not tell the caller what was and was not written.
        if (error !== inFlight.ticket.error && !this.tooLarge(error)) throw error;
      }
    }
    await this.whenIdle();
    if (this.failure) throw this.failure;
    const batch = [...this.queue.splice(0), ...last];
    const before = this.revision;
    try {
      await this.append(batch, true, options);
      return this.revision;
    } catch (error) {
      // Put the outputs back so a retry (after re-reading the stream) can still write them.
      if (this.revision === before) this.queue = batch.slice(0, batch.length - last.length);
      throw error;
    }
  }

  /**
   * The revision `event` (pushed here with `tracked`, the same object) was written at, once everything pushed
   * so far is written; undefined if it never was. Rejects as drain() does.
   */
  async revisionOf(event: EventData): Promise<bigint | undefined> {
    await this.drain();
    return this.revisions.get(event);
  }

  /**
   * The store refused an append to this stream as too large: it can be written in parts. Not a
   * refusal of an append it depended on (another stream's, e.g. a checkpoint write): that one fails it.
   */
  private tooLarge(error: unknown): boolean {
    return error instanceof AppendTooLargeError && error.stream === this.stream;
  }

  /** One append wrote `events`, in order and together, the last at `last`. */
  private written(events: readonly EventData[], last: bigint): void {
    for (let i = 0; i < events.length; i++) {
      const event = events[i]!;
      if (this.tracked.has(event)) this.revisions.set(event, last - BigInt(events.length - 1 - i));
    }
    this.advance(last);
  }

  /** Revisions only move forward (an append in flight may report after the one that followed it). */
  private advance(revision: bigint): void {
    if (revision > this.revision) this.revision = revision;
  }

  async drain(): Promise<void> {
    await this.whenIdle();
    if (this.failure) throw this.failure;
  }
}
