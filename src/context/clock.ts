/**
 * Time as the store's TTLs see it: the current time and one-shot timers. The server uses the
 * system clock; tests inject a manual one and move it forward, so expiry is tested without waiting.
 */
export interface Clock {
  /** Epoch milliseconds. */
  now(): number;
  /** Calls `fn` once, `ms` from now; `cancel` prevents it. */
  setTimer(ms: number, fn: () => void | Promise<void>): { cancel(): void };
}

/** setTimeout cannot wait longer than this (about 24.8 days); longer waits are re-armed when it fires. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimer(ms, fn) {
    const timer = setTimeout(() => void fn(), Math.min(Math.max(0, ms), MAX_TIMER_MS));
    // A pending expiry must not keep the process alive.
    timer.unref();
    return { cancel: () => clearTimeout(timer) };
  },
};
