import { MAX_TIMER_MS, type Clock } from "./clock.js";

/** After a failed pass (e.g. the store unavailable), the next one is tried this much later. */
const RETRY_MS = 1000;

export interface WakeLoopOptions {
  clock: Clock;
  /**
   * One pass: does (or starts) what is due now, and says when the next pass is due (epoch ms), or
   * undefined when only a wake can make something due.
   */
  pass(): Promise<number | undefined> | number | undefined;
  /** A pass that threw; the next one is tried a second later. */
  onError?(error: unknown): void;
}

/**
 * The loop every scheduler and sweeper runs on: one timer, armed at the earliest due time (a time
 * beyond setTimeout's range is reached by re-arming); passes started by that timer or by wake();
 * the wakes of one turn of the event loop coalesced into one pass; a wake that arrives while a
 * pass runs answered by one more pass after it; stop() cancels the timer and awaits the pass in
 * flight. It never polls: between passes nothing runs but the one timer.
 */
export class WakeLoop {
  private timer: { cancel(): void } | undefined;
  private armedFor: number | undefined;
  /** The passes in flight: the running one and those wakes asked for meanwhile. */
  private running: Promise<void> | undefined;
  private again = false;
  private queued = false;
  /** An earlier due time told while a pass ran: the timer armed after it honours it too. */
  private hint: number | undefined;
  private stopped = false;

  constructor(private readonly o: WakeLoopOptions) {}

  /** When the timer fires (epoch ms), if it is armed. */
  get nextDue(): number | undefined {
    return this.armedFor;
  }

  /** Whether a pass is running or about to. */
  get busy(): boolean {
    return this.running !== undefined || this.queued;
  }

  /** Something may have become due: one pass soon, however many wakes arrive in this turn. */
  wake(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    if (this.queued) return;
    this.queued = true;
    setImmediate(() => {
      this.queued = false;
      void this.run();
    });
  }

  /** Something falls due at `at` (epoch ms): the timer moves earlier if it was set later (no pass now). */
  dueAt(at: number): void {
    if (this.stopped) return;
    if (this.running) this.hint = Math.min(this.hint ?? at, at);
    else if (this.armedFor === undefined || at < this.armedFor) this.arm(at);
  }

  /** A pass now (after the one in flight, if any); resolves once it ran and the timer is set again. */
  run(): Promise<void> {
    if (this.stopped) return this.running ?? Promise.resolve();
    this.again = true;
    // Deferred by a microtask so that `running` is set before the pass's own code runs (its wakes join it).
    this.running ??= Promise.resolve().then(() => this.drain());
    return this.running;
  }

  /** Resolves once no pass is running or queued. */
  async idle(): Promise<void> {
    while (this.busy) await (this.running ?? new Promise((resolve) => setImmediate(resolve)));
  }

  /** Cancels the timer, refuses new passes, and awaits the one in flight. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.cancel();
    await this.running;
  }

  private async drain(): Promise<void> {
    let next: number | undefined;
    try {
      while (this.again && !this.stopped) {
        this.again = false;
        try {
          next = await this.o.pass();
        } catch (error) {
          this.o.onError?.(error);
          next = this.o.clock.now() + RETRY_MS;
        }
      }
    } finally {
      this.running = undefined;
      const hint = this.hint;
      this.hint = undefined;
      if (!this.stopped) this.arm(next === undefined ? hint : hint === undefined ? next : Math.min(next, hint));
    }
  }

  private arm(at: number | undefined): void {
    this.cancel();
    if (at === undefined) return;
    this.armedFor = at;
    const delay = Math.min(MAX_TIMER_MS, Math.max(0, at - this.o.clock.now()));
    this.timer = this.o.clock.setTimer(delay, () => {
      this.timer = undefined;
      this.armedFor = undefined;
      // Beyond setTimeout's range the timer fires early: then it is only set again.
      if (this.o.clock.now() < at) return this.arm(at);
      return this.run();
    });
  }

  private cancel(): void {
    this.timer?.cancel();
    this.timer = undefined;
    this.armedFor = undefined;
  }
}
