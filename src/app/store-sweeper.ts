/**
 * Expires store items: one timer, set to the earliest expiry the read model holds (never a
 * polling loop). When it fires, every item whose time has come gets a StoreItemExpired appended
 * with the revision the read model saw, so a put or refresh that landed meanwhile wins (and, with
 * several processes on one EventStoreDB, exactly one of them expires an item). Reads hide expired
 * items already; the sweep makes the expiry part of the log.
 */
import { WrongExpectedVersionError, type EventStore, type RecordedEvent } from "../eventstore/types.js";
import type { ReadModels } from "../read-models/all.js";
import { decideExpire, storeItemStream } from "../domain/store.js";
import type { Clock } from "../context/clock.js";
import { MAX_TIMER_MS } from "../context/clock.js";

/** Items expired per read of the read model. */
const SWEEP_PAGE = 100;
/** After a failed sweep (store unavailable), the next attempt waits at least this long. */
const RETRY_MS = 1000;

export interface StoreSweeperOptions {
  store: EventStore;
  readModels: ReadModels;
  clock: Clock;
  onError?(error: unknown): void;
}

export class StoreSweeper {
  private timer: { cancel(): void } | undefined;
  /** When the armed timer fires (epoch ms). */
  private armedFor: number | undefined;
  private running: Promise<number> | undefined;
  private unsubscribe: (() => void) | undefined;
  private stopped = false;

  constructor(private readonly o: StoreSweeperOptions) {}

  start(): void {
    // A new or refreshed expiry earlier than the armed one moves the timer forward.
    this.unsubscribe = this.o.readModels.runner.onApplied((event: RecordedEvent) => {
      if (event.type !== "StoreItemPut" && event.type !== "StoreItemTtlRefreshed") return;
      const at = (event.data as { expires_at: number | null }).expires_at;
      if (at !== null && (this.armedFor === undefined || at < this.armedFor)) this.arm();
    });
    this.arm();
  }

  /** Expires everything due now; resolves with the number of items expired. */
  sweep(): Promise<number> {
    this.running ??= this.sweepDue().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  stop(): Promise<unknown> {
    this.stopped = true;
    this.unsubscribe?.();
    this.timer?.cancel();
    this.timer = undefined;
    return this.running ?? Promise.resolve();
  }

  private arm(minDelay = 0): void {
    if (this.stopped || this.running) return; // a running sweep re-arms when it ends
    const next = this.o.readModels.storeItems.nextExpiry();
    this.timer?.cancel();
    this.timer = undefined;
    this.armedFor = undefined;
    if (next === undefined) return;
    const delay = Math.max(minDelay, next - this.o.clock.now());
    this.armedFor = this.o.clock.now() + delay;
    this.timer = this.o.clock.setTimer(delay, async () => {
      this.timer = undefined;
      this.armedFor = undefined;
      // Beyond setTimeout's range the timer fires early: then only re-arm.
      if (delay >= MAX_TIMER_MS && this.o.clock.now() < next) return this.arm();
      await this.sweep().catch(() => undefined);
    });
  }

  private async sweepDue(): Promise<number> {
    let expired = 0;
    let failed = false;
    try {
      for (;;) {
        const now = this.o.clock.now();
        const due = this.o.readModels.storeItems.expired(now, SWEEP_PAGE);
        let last: bigint | undefined;
        let progress = 0;
        for (const item of due) {
          try {
            const result = await this.o.store.append(storeItemStream(item.namespace, item.key), decideExpire(item, now), item.revision);
            last = result.position;
            expired++;
            progress++;
          } catch (error) {
            if (!(error instanceof WrongExpectedVersionError)) throw error;
            // Changed meanwhile (put, refresh, or another process expired it): the read model will say.
            await this.o.readModels.runner.waitForAtMost(await this.o.store.headPosition(), 5_000);
            progress++;
          }
        }
        if (last !== undefined) await this.o.readModels.runner.waitFor(last);
        if (due.length < SWEEP_PAGE || progress === 0) break;
      }
    } catch (error) {
      failed = true;
      this.o.onError?.(error);
    }
    this.running = undefined;
    this.arm(failed ? RETRY_MS : 0);
    return expired;
  }
}
