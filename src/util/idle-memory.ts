/**
 * Gives memory back once the process goes idle after a burst of work.
 *
 * V8 keeps the old generation a burst grew to (and its garbage) until its memory reducer decides
 * to act, which after a load often never happens: RSS stays at its peak. Here a sampler reads the
 * event loop's utilization every `sampleMs`; once it stayed under `idleBelow` for `idleSamples`
 * samples in a row, and RSS grew by `minGrowthBytes` since the last collection, it runs two full
 * collections (the second frees what the first's finalizers released) and then calls the
 * `release` hooks (e.g. SQLite's shrink_memory); while the young generation stays at its loaded
 * size, the next idle samples do it again (up to five times). A busy process is never interrupted by it.
 */
import { performance, type EventLoopUtilization } from "node:perf_hooks";
import { createRequire } from "node:module";

/** node:v8 and node:vm are loaded when first needed (the first idle collection), not at start-up. */
const builtin = createRequire(import.meta.url);

export interface IdleMemoryOptions {
  /** How often utilization is sampled. */
  sampleMs?: number;
  /** Samples in a row the process must be idle before memory is returned. */
  idleSamples?: number;
  /** Event-loop utilization (0…1) below which a sample counts as idle. */
  idleBelow?: number;
  /** RSS growth since the last collection that makes one worth its pause. */
  minGrowthBytes?: number;
  /** Called after the collections, for memory outside V8's heap. */
  release?: Array<() => void>;
  /** Where a failing release hook is reported. */
  log?: (message: string) => void;
  /** Called after memory was returned, with RSS before and after (metrics, logs, tests). */
  onReturn?: (rssBefore: number, rssAfter: number) => void;
  /** Utilization since the previous call (tests replace it; default: the event loop's). */
  utilization?: () => number;
  /** Resident set size in bytes (tests replace it). */
  rss?: () => number;
  /** The full collection (tests replace it; default: V8's). */
  gc?: () => void;
  /** Bytes the young generation holds (tests replace it; default: V8's new space). */
  youngBytes?: () => number;
}

/**
 * Young generation above this after a return was not shrunk: V8 shrinks it in a collection only when
 * it sees a low allocation rate, and the end of a load can still count as busy. Its floor is 1 to 2 MiB;
 * after a load it is twice the semi-space (32 MiB with `--max-semi-space-size=16`).
 */
const YOUNG_SHRUNK_BYTES = 8 * 1024 * 1024;
/** Returns tried again, at the next idle samples, while the young generation stays large. */
const MAX_RETRIES = 5;

/** Called without options: on Node 20, `{ type: "major" }` did not collect what a bare call did. */
type FullGc = () => void;

let exposedGc: FullGc | undefined;

/**
 * V8's `gc` function without starting node with --expose-gc: the flag is set at run time, and a new
 * context is created to pick the function up (the approach Jest's leak detector takes).
 */
export function fullGc(): FullGc {
  if (exposedGc) return exposedGc;
  const existing = (globalThis as { gc?: FullGc }).gc;
  if (typeof existing === "function") return (exposedGc = existing);
  (builtin("node:v8") as typeof import("node:v8")).setFlagsFromString("--expose-gc");
  exposedGc = (builtin("node:vm") as typeof import("node:vm")).runInNewContext("gc") as FullGc;
  return exposedGc;
}

export class IdleMemory {
  private readonly sampleMs: number;
  private readonly idleSamples: number;
  private readonly idleBelow: number;
  private readonly minGrowthBytes: number;
  private readonly release: Array<() => void>;
  private readonly log: (message: string) => void;
  private readonly onReturn: (rssBefore: number, rssAfter: number) => void;
  private readonly utilization: () => number;
  private readonly rss: () => number;
  private readonly gc: () => void;
  private readonly youngBytes: () => number;
  /** Returns still to try because the last one left the young generation large. */
  private retries = 0;
  private timer: NodeJS.Timeout | undefined;
  private idleRun = 0;
  private rssAfterLastReturn: number;
  /** How many times memory was returned (for /metrics and tests). */
  returns = 0;

  constructor(options: IdleMemoryOptions = {}) {
    // Idle for 6 to 8 s: short samples, so that a load's last busy sample does not hold its memory
    // long after the load has ended.
    this.sampleMs = options.sampleMs ?? 2_000;
    this.idleSamples = options.idleSamples ?? 3;
    this.idleBelow = options.idleBelow ?? 0.05;
    this.minGrowthBytes = options.minGrowthBytes ?? 32 * 1024 * 1024;
    this.release = options.release ?? [];
    this.log = options.log ?? ((m) => console.error(m));
    this.onReturn = options.onReturn ?? (() => {});
    this.utilization = options.utilization ?? eventLoopUtilization();
    this.rss = options.rss ?? (() => process.memoryUsage.rss());
    this.gc = options.gc ?? (() => fullGc()());
    this.youngBytes = options.youngBytes ?? newSpaceBytes;
    this.rssAfterLastReturn = this.rss();
  }

  start(): void {
    if (this.timer) return;
    this.utilization(); // the first window starts now
    this.timer = setInterval(() => this.sample(), this.sampleMs);
    this.timer.unref(); // never what keeps the process alive
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One sample: counts idle windows, and returns memory after enough of them. */
  sample(): void {
    if (this.utilization() >= this.idleBelow) {
      this.idleRun = 0;
      this.retries = 0; // busy again: the next return waits for idleness and growth
      return;
    }
    this.idleRun++;
    if (this.retries > 0) {
      this.collect();
      this.retries = this.youngShrunk() ? 0 : this.retries - 1;
      return;
    }
    if (this.idleRun < this.idleSamples) return;
    if (this.rss() - this.rssAfterLastReturn < this.minGrowthBytes) return;
    this.returnMemory();
  }

  /**
   * Two full collections, then the release hooks; RSS afterwards is the new baseline. When the young
   * generation was not shrunk, the next idle samples (up to MAX_RETRIES) collect again.
   */
  returnMemory(): void {
    this.collect();
    this.retries = this.youngShrunk() ? 0 : MAX_RETRIES;
  }

  private youngShrunk(): boolean {
    return this.youngBytes() <= YOUNG_SHRUNK_BYTES;
  }

  private collect(): void {
    const before = this.rss();
    this.gc();
    this.gc();
    for (const release of this.release) {
      try {
        release();
      } catch (error) {
        this.log(`returning idle memory: ${(error as Error).message}`);
      }
    }
    this.returns++;
    this.idleRun = 0;
    this.rssAfterLastReturn = this.rss();
    // The collections themselves show as utilization: the next window starts after them.
    this.utilization();
    this.onReturn(before, this.rssAfterLastReturn);
  }
}

/** The size of V8's new space (both semi-spaces). */
function newSpaceBytes(): number {
  const space = (builtin("node:v8") as typeof import("node:v8")).getHeapSpaceStatistics().find((s) => s.space_name === "new_space");
  return space?.space_size ?? 0;
}

/** A reader of the event loop's utilization since its previous call. */
function eventLoopUtilization(): () => number {
  let last: EventLoopUtilization = performance.eventLoopUtilization();
  return () => {
    const now = performance.eventLoopUtilization();
    const { utilization } = performance.eventLoopUtilization(now, last);
    last = now;
    return utilization;
  };
}
