/**
 * Cost benchmark: what a run costs, in counts that do not drift with this machine's speed (which varies up
 * to 2× from hour to hour, and blurs any timing comparison of a few percent). Two runs made hours apart, or
 * on two builds, can be compared directly.
 *   - the anchor: the example graph `agent` with a `MemorySaver`, invoked in this process (a new thread
 *     per invoke): promises created, bytes allocated on the V8 heap, scavenges and full GCs per invoke;
 *   - the server (built `dist/main.js`, or another build's main.js in COST_MAIN), preloaded with
 *     bench/support/cost-probe.cjs: the same counts per job (`POST /threads` + `runs/wait`) at
 *     concurrency 64 and one after another, and the store's work per job from /metrics (WAL syncs,
 *     read-model fold transactions), and its read and write system calls per job from /proc/<pid>/io;
 *   - the server's counts over the engine's, per job.
 * The counts move a little with batching (how many appends share a commit) and with when V8 collects;
 * runs/s is printed for orientation only.
 * Run: npm run bench -- cost [--tiny]
 */
import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { compileAgentGraph } from "./support/engine-graph.js";
import { AGENT_INPUT, agentJobs, jsonClient, runPool } from "./support/http.js";
import type { BenchOptions } from "./support/options.js";
import { startBenchServer } from "./support/server.js";
import { COST_PROBE, COST_PROBE_ENV, costProbeNodeArgs, costWindows, type ProbeCounts } from "./support/cost-window.js";
import { scrapeTotals, storeWorkPerJob } from "./support/metrics.js";
import { ioPerJob, readProcIo } from "./support/proc-io.js";
import { perSecond, round2 } from "./support/stats.js";

const FULL = { warmup: 600, engineInvokes: 1_000, c64Jobs: 2_000, sequentialJobs: 200 };
const TINY = { warmup: 20, engineInvokes: 30, c64Jobs: 64, sequentialJobs: 10 };

interface Probe {
  open(): void;
  close(): ProbeCounts;
}

/** Counts per unit: promises and KB allocated per job, GCs per 1,000 jobs. */
function perJob(counts: ProbeCounts, jobs: number) {
  return {
    promises: round2(counts.promises / jobs),
    allocated_kb: round2(counts.allocated_bytes / 1024 / jobs),
    minor_gcs_per_1000: round2((counts.minor_gcs * 1000) / jobs),
    major_gcs_per_1000: round2((counts.major_gcs * 1000) / jobs),
  };
}

/** The example graph invoked in this process, as the engine benchmark does, inside a probe window. */
async function engineCounts(invokes: number, warmup: number) {
  const probe = createRequire(import.meta.url)(COST_PROBE) as Probe;
  const graph = await compileAgentGraph();
  const invoke = () => graph.invoke(AGENT_INPUT, { configurable: { thread_id: randomUUID() } });
  for (let i = 0; i < warmup; i++) await invoke();
  probe.open();
  for (let i = 0; i < invokes; i++) await invoke();
  return perJob(probe.close(), invokes);
}

export async function benchCost(o: BenchOptions): Promise<Record<string, unknown>> {
  const size = o.tiny ? TINY : FULL;
  const engine = await engineCounts(size.engineInvokes, size.warmup);
  const dataDir = await mkdtemp(path.join(os.tmpdir(), "agent-server-bench-cost-"));
  const server = await startBenchServer(dataDir, { ...COST_PROBE_ENV, N_JOBS_PER_WORKER: "64" }, costProbeNodeArgs(), process.env.COST_MAIN);
  const openWindow = costWindows(server);
  const client = jsonClient(server.url, 64);
  const jobs = agentJobs(client);
  /** Runs `work` (`n` jobs) inside a probe window of the server. */
  const measured = async (n: number, work: () => Promise<unknown>) => {
    const closeWindow = await openWindow();
    const before = await scrapeTotals(server.url);
    // Read inside the scrapes, so that their own socket I/O is not counted.
    const ioBefore = await readProcIo(server.pid);
    const t0 = performance.now();
    await work();
    const ms = performance.now() - t0;
    const ioAfter = await readProcIo(server.pid);
    const after = await scrapeTotals(server.url);
    const counts = await closeWindow();
    return { ...perJob(counts, n), store_work: storeWorkPerJob(before, after, n), io: ioPerJob(ioBefore, ioAfter, n), runs_per_s: perSecond(n, ms) };
  };
  try {
    await runPool(size.warmup, 64, () => jobs.job());
    const c64 = await measured(size.c64Jobs, () => runPool(size.c64Jobs, 64, () => jobs.job()));
    const sequential = await measured(size.sequentialJobs, () => jobs.sequential(size.sequentialJobs));
    const ratio = (server: { promises: number; allocated_kb: number }) => ({
      promises: round2(server.promises / engine.promises),
      allocated: round2(server.allocated_kb / engine.allocated_kb),
    });
    return {
      setup: {
        engine: "builder.compile({ checkpointer: new MemorySaver() }).invoke in this process, a new thread_id per invoke, sequential",
        server: `${process.env.COST_MAIN ?? "dist/main.js"} with --require bench/support/cost-probe.cjs, SQLite synchronous=FULL, N_JOBS_PER_WORKER=64; a job = POST /threads + POST /threads/{id}/runs/wait`,
        counts:
          "promises created (async_hooks), KB allocated on the V8 heap (v8.GCProfiler), scavenges and full GCs per 1,000 jobs; io: the server's read and write system calls and their KB per job from /proc/<pid>/io (files and sockets; null off Linux)",
        sizes: size,
      },
      engine_per_invoke: engine,
      server_per_job: { c64, sequential },
      server_over_engine: { c64: ratio(c64), sequential: ratio(sequential) },
    };
  } finally {
    await client.close();
    await server.stop();
    await rm(dataDir, { recursive: true, force: true });
  }
}
