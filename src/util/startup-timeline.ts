/**
 * Where start-up time goes: each phase is marked when it ends, in milliseconds since the process
 * started (performance.now's origin, so module loading before the first mark is counted too).
 */
import { performance } from "node:perf_hooks";

export interface StartupPhase {
  phase: string;
  /** Milliseconds the phase took (since the previous mark, or since the process started). */
  ms: number;
  /** Milliseconds since the process started, when the phase ended. */
  atMs: number;
}

export class StartupTimeline {
  private readonly marks: { phase: string; atMs: number }[] = [];

  constructor(private readonly now: () => number = () => performance.now()) {}

  /** Marks the end of `phase`. */
  mark(phase: string): void {
    this.marks.push({ phase, atMs: this.now() });
  }

  phases(): StartupPhase[] {
    return this.marks.map((m, i) => ({ phase: m.phase, ms: m.atMs - (i === 0 ? 0 : this.marks[i - 1].atMs), atMs: m.atMs }));
  }
}
