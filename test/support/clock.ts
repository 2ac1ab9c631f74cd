import type { Clock } from "../../src/app/clock.js";

/**
 * A clock that moves only when told: `advance(ms)` runs the timers that fall due, in order, and
 * resolves once their work (e.g. a TTL sweep and its appends) is done. No real waiting.
 */
export class ManualClock implements Clock {
  private t: number;
  private timers: { at: number; fn: () => void | Promise<void>; cancelled: boolean }[] = [];

  constructor(start = Date.parse("2030-01-01T00:00:00Z")) {
    this.t = start;
  }

  now(): number {
    return this.t;
  }

  setTimer(ms: number, fn: () => void | Promise<void>): { cancel(): void } {
    const timer = { at: this.t + Math.max(0, ms), fn, cancelled: false };
    this.timers.push(timer);
    return { cancel: () => void (timer.cancelled = true) };
  }

  /** Timers armed and not yet fired or cancelled. */
  get pending(): number {
    return this.timers.filter((t) => !t.cancelled).length;
  }

  async advance(ms: number): Promise<void> {
    const end = this.t + ms;
    for (;;) {
      this.timers = this.timers.filter((t) => !t.cancelled);
      const due = this.timers.filter((t) => t.at <= end).sort((a, b) => a.at - b.at)[0];
      if (!due) break;
      this.timers.splice(this.timers.indexOf(due), 1);
      this.t = Math.max(this.t, due.at);
      await due.fn();
    }
    this.t = end;
  }
}
