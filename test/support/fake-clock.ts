import type { Clock } from "../../src/context/clock.js";

/**
 * A clock that only moves when told to; timers due by then fire in order. No real waiting: cron
 * ticks, thread TTLs and store-item TTLs are tested by moving it.
 */
export class FakeClock implements Clock {
  private timers: { at: number; fn: () => void | Promise<void>; id: number }[] = [];
  private ids = 0;

  constructor(private current = Date.parse("2030-01-01T00:00:00Z")) {}

  now(): number {
    return this.current;
  }

  setTimer(ms: number, fn: () => void | Promise<void>): { cancel(): void } {
    const id = ++this.ids;
    this.timers.push({ at: this.current + Math.max(0, ms), fn, id });
    return {
      cancel: () => {
        this.timers = this.timers.filter((t) => t.id !== id);
      },
    };
  }

  /** When the armed timers fall due (ms), earliest first. */
  pending(): number[] {
    return this.timers.map((t) => t.at).sort((a, b) => a - b);
  }

  /** Moves to `to` (ms or ISO), firing every timer due on the way (without awaiting their work). */
  set(to: number | string): void {
    const target = typeof to === "string" ? Date.parse(to) : to;
    for (;;) {
      const due = this.timers.filter((t) => t.at <= target).sort((a, b) => a.at - b.at)[0];
      if (!due) break;
      this.timers = this.timers.filter((t) => t.id !== due.id);
      this.current = Math.max(this.current, due.at);
      void due.fn();
    }
    this.current = target;
  }

  /** Moves `ms` forward, running the timers that fall due in order and awaiting the work each starts (e.g. a TTL sweep and its appends). */
  async advance(ms: number): Promise<void> {
    const end = this.current + ms;
    for (;;) {
      const due = this.timers.filter((t) => t.at <= end).sort((a, b) => a.at - b.at)[0];
      if (!due) break;
      this.timers = this.timers.filter((t) => t.id !== due.id);
      this.current = Math.max(this.current, due.at);
      await due.fn();
    }
    this.current = end;
  }
}
