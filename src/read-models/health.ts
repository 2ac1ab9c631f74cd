/**
 * The read models' side of honest health: what a wait for a position answers when the log is
 * unreachable or the read models stopped (a 503 the client may retry, never a hang or a 500).
 */
import { StoreUnavailableError } from "../eventstore/types.js";
import type { LogHealth } from "../eventstore/log-health.js";

/** The read-model runner's subscription and consumer name in health reports. */
export const READ_MODELS_SUBSCRIPTION = "read-models";

/** The subscriber name under which the failures of an unnamed onApplied / onDelivered listener are quarantined. */
export const READ_MODELS_LISTENER = "read-model listener";

/** Why a wait failed: the read models stopped folding the log (a 503 at the HTTP edge, and /ok says so). */
export function stoppedError(cause: unknown): StoreUnavailableError {
  const reason = cause instanceof Error ? cause.message : String(cause);
  return new StoreUnavailableError(`read models stopped: ${reason}`, { cause });
}

/**
 * `waiting`, unless the deadline passes while the log is not healthy: then a StoreUnavailableError.
 * A deadline that passes while all is well (a busy process) starts another: load is not an outage.
 */
export function positionWaitDeadline(waiting: Promise<void>, position: bigint, health: LogHealth, deadlineMs: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let timer: NodeJS.Timeout;
    const arm = () => {
      timer = setTimeout(() => {
        const verdict = health.verdict();
        if (verdict.ok) return arm();
        reject(new StoreUnavailableError(`read models did not reach position ${position} within ${deadlineMs} ms: ${verdict.reason}`));
      }, deadlineMs);
      timer.unref();
    };
    arm();
    waiting.then(
      () => {
        clearTimeout(timer);
        resolve();
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}
