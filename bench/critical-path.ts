/**
 * Critical-path benchmark: where the time of one sequential `runs/wait` goes, point by point, beside the
 * graph invoked in this process.
 *   - the server (built `dist/main.js`, or another build's main.js in CRITICAL_PATH_MAIN), preloaded with
 *     bench/support/critical-path-probe.cjs: for each wait (the thread made before it, outside the timing),
 *     the time of each trace point (src/util/trace-points.ts) from the request's arrival: route, run
 *     created, claim, graph start and end, checkpoint puts, the log's commits and syncs, the result, the
 *     answer; the median of each over the waits;
 *   - the engine: the example graph with a `MemorySaver`, invoked in this process (a new thread per
 *     invoke), with the same kind of timeline (the saver's getTuple, put and putWrites);
 *   - a summary: before the graph (request → graph.start), the graph in the server (graph.start →
 *     graph.end) beside the engine's whole invoke, after the graph (graph.end → response.finish), and
 *     what the client saw (its p50, which adds the client and the loopback); and the sequential target
 *     (client p50 ≤ 1.5 × invoke + 1 ms) taken apart: the time outside the graph against what the target leaves
 *     for it, and how much of it is the disk's sync after the run's end, the client with the loopback, and the
 *     server's own work (bench/support/sequential-budget.ts).
 * Medians of one run on a machine whose speed drifts: compare the parts of one run with each other.
 * The graph runs from a project folder with its own LangGraph copies, server and engine alike
 * (bench/support/project.ts); BENCH_GRAPH=repo runs this repository's graph instead.
 * Run: npm run bench -- critical-path [--tiny]
 */
import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { compileAgentGraph, newMemorySaver } from "./support/engine-graph.js";
import { benchGraph, type GraphSource } from "./support/project.js";
import { AGENT_INPUT, agentJobs, jsonClient, runPool } from "./support/http.js";
import type { BenchOptions } from "./support/options.js";
import { repoRoot, startBenchServer, probeLines } from "./support/server.js";
import { medianAt, sequentialBudget, type TimelineRow } from "./support/sequential-budget.js";
import { round2, summary } from "./support/stats.js";

const FULL = { warmup: 300, waits: 600, engineInvokes: 1_000 };
const TINY = { warmup: 20, waits: 10, engineInvokes: 30 };
const PROBE = path.join(repoRoot, "bench", "support", "critical-path-probe.cjs");

interface Probe {
  medianTimeline(records: [string, number][][]): TimelineRow[];
}
const probe = createRequire(import.meta.url)(PROBE) as Probe;

/** The example graph invoked in this process, its MemorySaver's calls timed from each invoke's start. */
async function engineTimeline(invokes: number, warmup: number, source: GraphSource): Promise<TimelineRow[]> {
  const saver = await newMemorySaver(source);
  let record: [string, number][] | undefined;
  let t0 = 0;
  const mark = (name: string) => record?.push([name, performance.now() - t0]);
  for (const method of ["getTuple", "put", "putWrites"] as const) {
    const original = saver[method].bind(saver) as (...args: unknown[]) => unknown;
    (saver as unknown as Record<string, unknown>)[method] = (...args: unknown[]) => {
      mark(`checkpoint.${method}`);
      return original(...args);
    };
  }
  const graph = await compileAgentGraph(saver, source);
  const records: [string, number][][] = [];
  for (let i = 0; i < warmup + invokes; i++) {
    record = [["invoke.start", 0]];
    t0 = performance.now();
    await graph.invoke(AGENT_INPUT, { configurable: { thread_id: randomUUID() } });
    mark("invoke.end");
    if (i >= warmup) records.push(record);
  }
  return probe.medianTimeline(records);
}

const between = (timeline: TimelineRow[], from: string, to: string): number | null => {
  const a = medianAt(timeline, from);
  const b = medianAt(timeline, to);
  return a === undefined || b === undefined ? null : round2(b - a);
};

export async function benchCriticalPath(o: BenchOptions): Promise<Record<string, unknown>> {
  const size = o.tiny ? TINY : FULL;
  const source = await benchGraph();
  const engine = await engineTimeline(size.engineInvokes, Math.min(size.warmup, 100), source);
  const dataDir = await mkdtemp(path.join(os.tmpdir(), "agent-server-bench-critical-path-"));
  const server = await startBenchServer(
    dataDir,
    { CRITICAL_PATH_PROBE: "1", LANGGRAPH_JSON: source.langgraphJson },
    ["--require", PROBE],
    process.env.CRITICAL_PATH_MAIN ?? source.script,
  );
  const nextLine = probeLines(server, "critical-path ");
  const client = jsonClient(server.url, 8);
  const jobs = agentJobs(client);
  try {
    await runPool(size.warmup, 8, () => jobs.job());
    await jobs.sequential(Math.min(size.warmup, 100));
    server.child.kill("SIGUSR2"); // drops what the warm-up recorded
    await nextLine();
    const latencies = await jobs.sequential(size.waits);
    server.child.kill("SIGUSR2");
    const { waits, timeline } = JSON.parse(await nextLine()) as { waits: number; timeline: TimelineRow[] };
    if (waits !== size.waits) throw new Error(`critical-path probe: ${waits} waits recorded, ${size.waits} made`);
    const engineMs = medianAt(engine, "invoke.end") ?? null;
    const graphMs = between(timeline, "graph.start", "graph.end");
    const client_p50_ms = summary(latencies).p50_ms;
    return {
      setup: {
        graph: source.describe,
        server: `${process.env.CRITICAL_PATH_MAIN ?? "dist/main.js"} with --require bench/support/critical-path-probe.cjs, SQLite synchronous=FULL; ${size.waits} sequential POST /threads/{id}/runs/wait, each on a thread made before it`,
        engine: `builder.compile({ checkpointer: new MemorySaver() }).invoke in this process, a new thread_id per invoke, ${size.engineInvokes} invokes`,
        times:
          "median ms of each point from the request's arrival on the server (engine: from the invoke's start); a name's k-th occurrence in one wait is its own point (name#k)",
      },
      summary: {
        client_p50_ms,
        server_request_to_finish_ms: medianAt(timeline, "response.finish") ?? null,
        before_graph_ms: between(timeline, "request", "graph.start"),
        graph_in_server_ms: graphMs,
        engine_invoke_ms: engineMs,
        graph_over_engine: graphMs !== null && engineMs ? round2(graphMs / engineMs) : null,
        after_graph_ms: between(timeline, "graph.end", "response.finish"),
        sequential_budget: sequentialBudget(timeline, client_p50_ms, engineMs),
      },
      server_timeline: timeline,
      engine_timeline: engine,
    };
  } finally {
    await client.close();
    await server.stop();
    await rm(dataDir, { recursive: true, force: true });
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  const { parseBenchOptions } = await import("./support/options.js");
  console.log(JSON.stringify(await benchCriticalPath(parseBenchOptions(process.argv.slice(2))), null, 2));
}
