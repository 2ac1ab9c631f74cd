import type { Clock } from "../../src/runtime/cron-scheduler.js";

/** A clock that only moves when told to; timers due by then fire in order. */
export class FakeClock implements Clock {
  private timers: { at: number; fn: () => void; id: number }[] = [];
  private ids = 0;

  constructor(private current: number) {}

  now(): number {
    return this.current;
  }

  setTimer(ms: number, fn: () => void): () => void {
    const id = ++this.ids;
    this.timers.push({ at: this.current + Math.max(0, ms), fn, id });
    return () => {
      this.timers = this.timers.filter((t) => t.id !== id);
    };
  }

  /** Moves to `to` (ms or ISO), firing every timer due on the way. */
  set(to: number | string): void {
    const target = typeof to === "string" ? Date.parse(to) : to;
    for (;;) {
      const due = this.timers.filter((t) => t.at <= target).sort((a, b) => a.at - b.at)[0];
      if (!due) break;
      this.timers = this.timers.filter((t) => t.id !== due.id);
      this.current = Math.max(this.current, due.at);
      due.fn();
    }
    this.current = target;
  }

  advance(ms: number): void {
    this.set(this.current + ms);
  }
}
