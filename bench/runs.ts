/**
 * Runs benchmark: the server as a child process, started as `npm start` does (the esbuild bundle
 * `dist/main.js`, built first), SQLite store with synchronous=FULL, the example graph `agent`
 * (src/graphs/agent.ts, by default a copy in a project folder: see below), driven over HTTP on 127.0.0.1 with keep-alive
 * connections. A new thread per run.
 *   - `runs.wait` latency, sequential (p50/p99)
 *   - `runs.wait` throughput at concurrency 16 and 64
 *   - SSE (`/runs/stream`, stream_mode values): time to the first event and to the end
 *   - `POST /threads` throughput at concurrency 16 and 64 (after 2,000 creates of warm-up)
 *   - server RSS at start and after the load
 *   - in-process `graph.invoke` rate of the same graph (no server, no checkpointer) and our ratio
 * The graph runs from a project folder with its own LangGraph copies, server and in-process invoke alike
 * (bench/support/project.ts); BENCH_GRAPH=repo runs this repository's langgraph.json and graph instead.
 * Run: npm run bench -- runs [--tiny]   (or npx tsx bench/runs.ts; prints one JSON object)
 */
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { Pool } from "undici";
import { runPool } from "./support/http.js";
import { parseBenchOptions, type BenchOptions } from "./support/options.js";
import { rssMiB, startBenchServer } from "./support/server.js";
import { importAgentModule } from "./support/engine-graph.js";
import { benchGraph } from "./support/project.js";
import { perSecond, round2, summary } from "./support/stats.js";

const FULL = { warmup: 50, sequential: 300, perConcurrency: 2_000, sse: 200, threadsWarmup: 2_000, threads: 10_000, invokes: 2_000 };
const TINY = { warmup: 5, sequential: 20, perConcurrency: 100, sse: 10, threadsWarmup: 20, threads: 200, invokes: 50 };

const input = { messages: [{ role: "user", content: "hello" }] };

export async function benchRuns(options: BenchOptions = { tiny: false, big: false }): Promise<Record<string, unknown>> {
  const size = options.tiny ? TINY : FULL;
  const dataDir = await mkdtemp(path.join(os.tmpdir(), "agent-server-bench-runs-"));
  const maxJobs = process.env.N_JOBS_PER_WORKER ?? "64";
  const source = await benchGraph();
  const server = await startBenchServer(dataDir, { N_JOBS_PER_WORKER: maxJobs, LANGGRAPH_JSON: source.langgraphJson }, [], source.script).catch(
    async (error: unknown) => {
      await rm(dataDir, { recursive: true, force: true });
      throw error;
    },
  );
  const pool = new Pool(server.url, { connections: 128, pipelining: 1, keepAliveTimeout: 30_000 });
  const post = async (p: string, body: unknown) => {
    const res = await pool.request({ path: p, method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    const text = await res.body.text();
    if (res.statusCode !== 200) throw new Error(`${p}: HTTP ${res.statusCode} ${text}`);
    return text;
  };
  const newThread = async () => (JSON.parse(await post("/threads", {})) as { thread_id: string }).thread_id;
  const wait = async (threadId: string) => {
    const text = await post(`/threads/${threadId}/runs/wait`, { assistant_id: "agent", input });
    if (!text.includes("You said: hello")) throw new Error(`unexpected result ${text}`);
  };
  try {
    const rssAtStart = await rssMiB(server.pid);
    // warm-up: JIT, graph, SQLite pages
    for (let i = 0; i < size.warmup; i++) await wait(await newThread());

    const latencies: number[] = [];
    for (let i = 0; i < size.sequential; i++) {
      const tid = await newThread();
      const t0 = performance.now();
      await wait(tid);
      latencies.push(performance.now() - t0);
    }

    const throughput: Record<string, number> = {};
    for (const c of [16, 64]) {
      const threads = await Promise.all(Array.from({ length: size.perConcurrency }, () => newThread()));
      const ms = await runPool(size.perConcurrency, c, (i) => wait(threads[i]));
      throughput[`c${c}_runs_per_s`] = perSecond(size.perConcurrency, ms);
    }

    const first: number[] = [];
    const end: number[] = [];
    for (let i = 0; i < size.sse; i++) {
      const tid = await newThread();
      const t0 = performance.now();
      const res = await pool.request({
        path: `/threads/${tid}/runs/stream`,
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ assistant_id: "agent", input, stream_mode: ["values"] }),
      });
      let seen = false;
      let text = "";
      for await (const chunk of res.body) {
        if (!seen) {
          first.push(performance.now() - t0);
          seen = true;
        }
        text += chunk.toString();
      }
      end.push(performance.now() - t0);
      if (!text.includes("You said: hello")) throw new Error("stream without the reply");
    }

    // POST /threads at concurrency 16 (the target: 6,000/s) and 64, after a warm-up of its own: up to
    // here the server ran runs, and its first thousand creates at this rate still run code V8 has not optimised.
    await runPool(size.threadsWarmup, 16, async () => void (await newThread()));
    const threadsPerS: Record<string, number> = {};
    for (const c of [16, 64]) threadsPerS[`c${c}`] = perSecond(size.threads, await runPool(size.threads, c, async () => void (await newThread())));

    const rss = await rssMiB(server.pid);

    const { graph } = await importAgentModule(source);
    for (let i = 0; i < Math.min(100, size.invokes); i++) await graph.invoke(input);
    const g0 = performance.now();
    for (let i = 0; i < size.invokes; i++) await graph.invoke(input);
    const invokePerS = perSecond(size.invokes, performance.now() - g0);
    const runsInLog = size.warmup + size.sequential + 2 * size.perConcurrency + size.sse;

    return {
      setup: {
        mode: options.tiny ? "tiny" : "full",
        store: "sqlite synchronous=FULL",
        graph: source.describe,
        n_jobs_per_worker: Number(maxJobs),
        client: "undici keep-alive, 127.0.0.1",
      },
      wait_sequential: summary(latencies),
      wait_throughput: throughput,
      sse: { first_event: summary(first), end: summary(end) },
      threads_create_per_s: threadsPerS,
      server_rss_mib: { at_start: rssAtStart, after_load: rss, runs_in_log: runsInLog, threads_in_log: runsInLog + size.threadsWarmup + 2 * size.threads },
      in_process_invoke_per_s: invokePerS,
      server_c64_vs_in_process: round2(throughput.c64_runs_per_s / invokePerS),
      targets: { wait_p50_ms: 10, c64_runs_per_s: 300, sse_first_event_p50_ms: 5, threads_per_s_c16: 6000, rss_mib: 120 },
    };
  } finally {
    await server.stop();
    await pool.close();
    await rm(dataDir, { recursive: true, force: true });
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  console.log(JSON.stringify(await benchRuns(parseBenchOptions(process.argv.slice(2))), null, 2));
}
