/**
 * Counts what a process makes in a window, counts that do not depend on how fast the machine is at the
 * moment (the cost benchmark's probe):
 * - promises: every promise created (an async_hooks init hook: it costs time, but only counts are read);
 * - allocated_bytes: bytes V8 allocated on its heap, from the used heap size before each GC and after the
 *   previous one (v8.GCProfiler), plus what was added since the last GC;
 * - minor_gcs / major_gcs: scavenges and full mark-compacts (the same profiler's record of each GC).
 *
 * In the server it is preloaded (`node --require bench/support/cost-probe.cjs`, with COST_PROBE_SIGNALS=1):
 * a first SIGUSR2 opens the window and prints `cost-probe started`, the next closes it and prints
 * `cost-probe {json}` on stdout. In the benchmark's own process, `open` and `close` do the same for the
 * graph invoked in-process.
 */
"use strict";
const { createHook } = require("node:async_hooks");
const v8 = require("node:v8");

let window;

createHook({
  init(_id, type) {
    if (window && type === "PROMISE") window.promises++;
  },
}).enable();

function usedHeap() {
  return v8.getHeapStatistics().used_heap_size;
}

function open() {
  if (window) throw new Error("cost-probe: a window is open already");
  const profiler = new v8.GCProfiler();
  window = { promises: 0, profiler, usedAtStart: usedHeap() };
  profiler.start();
}

function close() {
  if (!window) throw new Error("cost-probe: no window is open");
  const { profiler, usedAtStart, promises } = window;
  window = undefined;
  const usedAtEnd = usedHeap();
  const { statistics } = profiler.stop();
  let allocated = 0;
  let after = usedAtStart;
  for (const gc of statistics) {
    allocated += Math.max(0, gc.beforeGC.heapStatistics.usedHeapSize - after);
    after = gc.afterGC.heapStatistics.usedHeapSize;
  }
  allocated += Math.max(0, usedAtEnd - after);
  return {
    promises,
    allocated_bytes: allocated,
    minor_gcs: statistics.filter((gc) => gc.gcType === "Scavenge" || gc.gcType === "MinorMarkCompact").length,
    major_gcs: statistics.filter((gc) => gc.gcType === "MarkSweepCompact").length,
  };
}

if (process.env.COST_PROBE_SIGNALS === "1") {
  process.on("SIGUSR2", () => {
    if (!window) {
      open();
      process.stdout.write("cost-probe started\n");
    } else {
      process.stdout.write(`cost-probe ${JSON.stringify(close())}\n`);
    }
  });
}

module.exports = { open, close };
