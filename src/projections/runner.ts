import type { EventStore, RecordedEvent, Subscription } from "../eventstore/types.js";
import { applyEvent, type AnyProjection, type Projection } from "../../projections/projection.js";

/**
 * Feeds the pure folds of projections/ from a catch-up subscription to `$all` and keeps their read
 * models in memory. Command handlers call `waitFor(position)` after their append so that they
 * answer only once their own write is visible (read-your-writes).
 */
export class ProjectionRunner {
  private readonly models = new Map<string, Map<string, unknown>>();
  private subscription: Subscription | undefined;
  private applied = -1n;
  private waiters: { position: bigint; resolve: () => void; reject: (e: unknown) => void }[] = [];
  private failure: unknown;
  private done: Promise<void> | undefined;
  private readonly listeners = new Set<(event: RecordedEvent) => void>();

  constructor(
    private readonly store: EventStore,
    private readonly projections: readonly AnyProjection[],
  ) {}

  /** Position of the last event folded into the read models. */
  get position(): bigint {
    return this.applied;
  }

  /** Subscribes from the beginning of the log; resolves once history has been folded. */
  start(): Promise<void> {
    const prefixes = [...new Set(this.projections.flatMap((p) => p.streamPrefixes))];
    const subscription = this.store.subscribeToAll({ fromPosition: "start" });
    this.subscription = subscription;
    return new Promise<void>((resolveCaughtUp, rejectCaughtUp) => {
      this.done = (async () => {
        try {
          for await (const item of subscription) {
            if (item.kind === "caughtUp") {
              resolveCaughtUp();
              continue;
            }
            const event = item.event;
            if (prefixes.some((p) => event.streamId.startsWith(p))) applyEvent(this.projections, this.models, event);
            this.applied = event.position;
            this.release();
            for (const listener of this.listeners) listener(event);
          }
          resolveCaughtUp();
        } catch (error) {
          this.failure = error;
          rejectCaughtUp(error);
          for (const w of this.waiters.splice(0)) w.reject(error);
        }
      })();
    });
  }

  /** Resolves once every event up to `position` has been folded. */
  waitFor(position: bigint): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    if (position <= this.applied) return Promise.resolve();
    return new Promise((resolve, reject) => this.waiters.push({ position, resolve, reject }));
  }

  /**
   * Calls `listener` after each event has been folded (the read models already show it), e.g. so
   * the run worker learns that a run became eligible. Returns the function that unsubscribes.
   */
  onApplied(listener: (event: RecordedEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  get<S>(projection: Projection<S>, key: string): S | undefined {
    return this.models.get(projection.name)?.get(key) as S | undefined;
  }

  values<S>(projection: Projection<S>): S[] {
    return [...((this.models.get(projection.name)?.values() ?? []) as Iterable<S>)];
  }

  /** A copy of every read model, for comparisons (e.g. a rebuild from position 0). */
  snapshot(): Record<string, Record<string, unknown>> {
    const out: Record<string, Record<string, unknown>> = {};
    for (const p of this.projections) out[p.name] = Object.fromEntries(this.models.get(p.name) ?? []);
    return out;
  }

  async stop(): Promise<void> {
    await this.subscription?.close();
    await this.done;
    for (const w of this.waiters.splice(0)) w.reject(new Error("projection runner stopped"));
  }

  private release(): void {
    if (this.waiters.length === 0) return;
    const still: typeof this.waiters = [];
    for (const w of this.waiters) (w.position <= this.applied ? w.resolve() : still.push(w));
    this.waiters = still;
  }
}
