import type { AppContext } from "./context.js";
import type { ThreadLifecycle } from "./thread-lifecycle.js";
import { runInRequestContext } from "../context/request-context.js";
import { SYSTEM_ACTOR } from "../context/attribution.js";
import { isNotFound } from "../domain/errors.js";
import { purgeThread } from "./audit.js";
import type { Clock } from "../context/clock.js";
import { WakeLoop } from "../context/wake-loop.js";
import { isoOf } from "../util/time.js";
import { isEvent } from "../domain/event-of.js";
import { THREAD_STREAM_PREFIX } from "../domain/threads.js";

/**
 * Whether a thread event can move the next expiry: a create or update that sets `expires_at` (an
 * update's null clears it), a purge; and a delete, which keeps the expiry (the sweeper purges deleted
 * threads too) and costs one pass that finds it unchanged. A thread created without a TTL (most of them) does
 * not cost the sweeper a pass. A removed thread's expiry is dropped the same way by the pass, but a
 * missed removal would only make the timer fire early, find nothing and be set again.
 */
export function changesThreadExpiry(event: { streamId: string; type: string; data: unknown }): boolean {
  if (!event.streamId.startsWith(THREAD_STREAM_PREFIX)) return false;
  if (event.type === "ThreadDeleted" || event.type === "ThreadPurged") return true;
  if (!isEvent(event, "ThreadCreated") && !isEvent(event, "ThreadUpdated")) return false;
  return event.data.expires_at !== undefined;
}

export interface TtlSweeperOptions {
  ctx: AppContext;
  lifecycle: ThreadLifecycle;
  clock: Clock;
  log?: (message: string) => void;
}

/** The reason a ThreadPurged of an expired thread gives. */
export const TTL_PURGE_REASON = "thread TTL expired";

/**
 * Thread TTL (`ttl`, strategy delete): one timer, set to the next expiry the threads read model
 * knows (an index lookup), looked at again whenever a thread's TTL may have changed. No polling.
 * Expired threads are purged as `DELETE /threads/{id}?purge=true` purges them (deleted, their content
 * removed from the log and, with a key, shredded; attributed to `system`): a TTL is a retention limit.
 */
export class TtlSweeper {
  private readonly loop: WakeLoop;
  private unsubscribe: (() => void) | undefined;
  private stopped = false;

  constructor(private readonly o: TtlSweeperOptions) {
    this.loop = new WakeLoop({
      clock: o.clock,
      pass: () => runInRequestContext({ actor: SYSTEM_ACTOR, causationId: "ttl-sweeper" }, () => this.purgeExpired()),
      onError: (error) => o.log?.(`ttl sweeper: ${(error as Error).message}`),
    });
  }

  start(): void {
    this.unsubscribe = this.o.ctx.readModels.runner.onApplied((event) => {
      if (changesThreadExpiry(event)) this.loop.wake();
    });
    void this.loop.run();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.unsubscribe?.();
    await this.loop.stop();
  }

  /** When the timer is set for (ISO 8601), if it is set: for tests and diagnostics. */
  get nextSweep(): string | undefined {
    const at = this.loop.nextDue;
    return at === undefined ? undefined : isoOf(at);
  }

  /** Purges every thread expired now; resolves when done (and the timer is set again). */
  sweep(): Promise<void> {
    return this.loop.run();
  }

  /** Purges the threads expired now; says when the next one expires. */
  private async purgeExpired(): Promise<number | undefined> {
    const threads = this.o.ctx.readModels.threads;
    for (;;) {
      const expired = threads.expiredAt(isoOf(this.o.clock.now()));
      if (expired.length === 0 || this.stopped) break;
      for (const threadId of expired) {
        try {
          await purgeThread(this.o.ctx, this.o.lifecycle, threadId, SYSTEM_ACTOR, TTL_PURGE_REASON);
        } catch (error) {
          if (!isNotFound(error)) throw error; // purged meanwhile
        }
      }
    }
    const next = threads.nextExpiry();
    return next === undefined ? undefined : Date.parse(next);
  }
}
