import type { AppContext } from "./context.js";
import type { ThreadLifecycle } from "./thread-lifecycle.js";
import { runInRequestContext } from "../context/request-context.js";
import { SYSTEM_ACTOR } from "../context/attribution.js";
import { isNotFound } from "../domain/errors.js";
import { systemClock, MAX_TIMER_MS, type Clock } from "../context/clock.js";
import { isoOf } from "../util/time.js";

const THREAD_EVENTS_WITH_TTL = new Set(["ThreadCreated", "ThreadUpdated", "ThreadDeleted", "ThreadPurged"]);


/**
 * Thread TTL (`ttl`, strategy delete): one timer, set to the next expiry the threads read model
 * knows (an index lookup), re-armed whenever a thread's TTL may have changed. No polling. Expired
 * threads are deleted as the API deletes them (events, attributed to `system`).
 */
export class TtlSweeper {
  private timer: { cancel(): void } | undefined;
  private armedFor: string | undefined;
  private rearmQueued = false;
  private sweeping: Promise<void> | undefined;
  private stopped = false;
  private unsubscribe: (() => void) | undefined;

  constructor(
    private readonly ctx: AppContext,
    private readonly lifecycle: ThreadLifecycle,
    private readonly clock: Clock = systemClock,
  ) {}

  start(): void {
    this.unsubscribe = this.ctx.readModels.runner.onApplied((event) => {
      if (event.streamId.startsWith("thread-") && THREAD_EVENTS_WITH_TTL.has(event.type)) this.queueRearm();
    });
    this.arm();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.unsubscribe?.();
    this.timer?.cancel();
    this.timer = undefined;
    await this.sweeping;
  }

  /** When the timer is set for (ISO 8601), if it is set: for tests and diagnostics. */
  get nextSweep(): string | undefined {
    return this.armedFor;
  }

  /** Deletes every thread expired now; resolves when done (and the timer is set again). */
  sweep(): Promise<void> {
    this.sweeping ??= runInRequestContext({ actor: SYSTEM_ACTOR, causationId: "ttl-sweeper" }, () => this.deleteExpired()).finally(() => {
      this.sweeping = undefined;
      this.arm();
    });
    return this.sweeping;
  }

  private async deleteExpired(): Promise<void> {
    for (;;) {
      const expired = this.ctx.readModels.threads.expiredAt(isoOf(this.clock.now()));
      if (expired.length === 0 || this.stopped) return;
      for (const threadId of expired) {
        try {
          await this.lifecycle.delete(threadId);
        } catch (error) {
          if (!(isNotFound(error))) throw error; // deleted meanwhile
        }
      }
    }
  }

  /** Many thread events in one batch re-arm once. */
  private queueRearm(): void {
    if (this.rearmQueued) return;
    this.rearmQueued = true;
    queueMicrotask(() => {
      this.rearmQueued = false;
      if (!this.sweeping) this.arm();
    });
  }

  private arm(): void {
    if (this.stopped) return;
    const next = this.ctx.readModels.threads.nextExpiry();
    if (next === this.armedFor && this.timer !== undefined) return;
    this.timer?.cancel();
    this.timer = undefined;
    this.armedFor = next;
    if (next === undefined) return;
    const delay = Math.min(MAX_TIMER_MS, Math.max(0, Date.parse(next) - this.clock.now()));
    this.timer = this.clock.setTimer(delay, () => {
      this.timer = undefined;
      this.armedFor = undefined;
      void this.sweep().catch((error: unknown) => console.error(`ttl sweeper: ${(error as Error).message}`));
    });
  }
}
