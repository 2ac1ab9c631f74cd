/**
 * Runs benchmark: the server as a child process, started as `npm start` does (the esbuild bundle
 * `dist/main.js`, built first), SQLite store with
 * synchronous=FULL, the repository's langgraph.json with the example graph `agent`), driven over
 * HTTP on 127.0.0.1 with keep-alive connections. A new thread per run.
 *   - `runs.wait` latency, sequential (p50/p99)
 *   - `runs.wait` throughput at concurrency 16 and 64
 *   - SSE (`/runs/stream`, stream_mode values): time to the first event and to the end
 *   - `POST /threads` throughput at concurrency 64
 *   - server RSS at start and after the load (every read model is in memory, so it grows with the log)
 *   - in-process `graph.invoke` rate of the same graph (no server, no checkpointer) and our ratio
 * Run: npx tsx bench/runs.ts   (prints one JSON object)
 */
import { execFileSync, spawn } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Agent, request } from "undici";

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const SEQUENTIAL = 300;
const PER_CONCURRENCY = 2_000;
const SSE_RUNS = 200;
const THREADS = 5_000;
const INVOKES = 2_000;

const input = { messages: [{ role: "user", content: "hello" }] };

function percentile(sorted: number[], p: number): number {
  return +sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))].toFixed(2);
}

function summary(ms: number[]) {
  const s = [...ms].sort((a, b) => a - b);
  return { n: s.length, p50_ms: percentile(s, 50), p99_ms: percentile(s, 99), mean_ms: +(s.reduce((a, b) => a + b, 0) / s.length).toFixed(2) };
}

async function startServer(dataDir: string, env: Record<string, string>) {
  execFileSync("npm", ["run", "build", "--silent"], { cwd: root, stdio: "inherit" });
  const child = spawn(process.execPath, ["--enable-source-maps", "dist/main.js"], {
    cwd: root,
    env: { ...process.env, HOST: "127.0.0.1", PORT: "0", DATA_DIR: dataDir, LANGGRAPH_JSON: path.join(root, "langgraph.json"), LOG_LEVEL: "silent", ...env },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const url = await new Promise<string>((resolve, reject) => {
    let out = "";
    child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
      out += chunk;
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) resolve(m[1]);
    });
    child.on("exit", (code) => reject(new Error(`server exited with ${code}`)));
  });
  return { child, url };
}

async function rssMiB(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
  return +(kb / 1024).toFixed(1);
}

export async function benchRuns(): Promise<Record<string, unknown>> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), "agent-server-bench-runs-"));
  const maxJobs = process.env.N_JOBS_PER_WORKER ?? "64";
  const { child, url } = await startServer(dataDir, { N_JOBS_PER_WORKER: maxJobs });
  const dispatcher = new Agent({ connections: 128, pipelining: 1, keepAliveTimeout: 30_000 });
  const post = async (p: string, body: unknown) => {
    const res = await request(`${url}${p}`, { method: "POST", dispatcher, headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    const text = await res.body.text();
    if (res.statusCode !== 200) throw new Error(`${p}: HTTP ${res.statusCode} ${text}`);
    return text;
  };
  const newThread = async () => (JSON.parse(await post("/threads", {})) as { thread_id: string }).thread_id;
  const wait = async (threadId: string) => {
    const text = await post(`/threads/${threadId}/runs/wait`, { assistant_id: "agent", input });
    if (!text.includes("You said: hello")) throw new Error(`unexpected result ${text}`);
  };
  const pool = async (n: number, concurrency: number, job: (i: number) => Promise<void>) => {
    let next = 0;
    await Promise.all(Array.from({ length: concurrency }, async () => {
      while (next < n) await job(next++);
    }));
  };
  try {
    const rssAtStart = await rssMiB(child.pid!);
    // warm-up: JIT, graph, SQLite pages
    for (let i = 0; i < 50; i++) await wait(await newThread());

    const latencies: number[] = [];
    for (let i = 0; i < SEQUENTIAL; i++) {
      const tid = await newThread();
      const t0 = performance.now();
      await wait(tid);
      latencies.push(performance.now() - t0);
    }

    const throughput: Record<string, number> = {};
    for (const c of [16, 64]) {
      const threads = await Promise.all(Array.from({ length: PER_CONCURRENCY }, () => newThread()));
      const t0 = performance.now();
      await pool(PER_CONCURRENCY, c, (i) => wait(threads[i]));
      throughput[`c${c}_runs_per_s`] = Math.round(PER_CONCURRENCY / ((performance.now() - t0) / 1000));
    }

    const first: number[] = [];
    const end: number[] = [];
    for (let i = 0; i < SSE_RUNS; i++) {
      const tid = await newThread();
      const t0 = performance.now();
      const res = await request(`${url}/threads/${tid}/runs/stream`, {
        method: "POST", dispatcher, headers: { "content-type": "application/json" },
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

    const t0 = performance.now();
    await pool(THREADS, 64, async () => void (await newThread()));
    const threadsPerS = Math.round(THREADS / ((performance.now() - t0) / 1000));

    const rss = await rssMiB(child.pid!);

    const { graph } = await import(pathToFileURL(path.join(root, "src", "graphs", "agent.ts")).href);
    for (let i = 0; i < 100; i++) await graph.invoke(input);
    const g0 = performance.now();
    for (let i = 0; i < INVOKES; i++) await graph.invoke(input);
    const invokePerS = Math.round(INVOKES / ((performance.now() - g0) / 1000));

    return {
      setup: { store: "sqlite synchronous=FULL", graph: "agent (src/graphs/agent.ts)", n_jobs_per_worker: Number(maxJobs), client: "undici keep-alive, 127.0.0.1" },
      wait_sequential: summary(latencies),
      wait_throughput: throughput,
      sse: { first_event: summary(first), end: summary(end) },
      threads_create_per_s_c64: threadsPerS,
      server_rss_mib: { at_start: rssAtStart, after_load: rss, runs_in_log: 50 + SEQUENTIAL + 2 * PER_CONCURRENCY + SSE_RUNS, threads_in_log: 50 + SEQUENTIAL + 2 * PER_CONCURRENCY + SSE_RUNS + THREADS },
      in_process_invoke_per_s: invokePerS,
      server_c64_vs_in_process: +(throughput.c64_runs_per_s / invokePerS).toFixed(3),
      targets: { wait_p50_ms: 10, c64_runs_per_s: 300, sse_first_event_p50_ms: 5, threads_per_s: 4000, rss_mib: 120 },
    };
  } finally {
    child.kill("SIGTERM");
    await new Promise((r) => child.once("exit", r));
    await dispatcher.close();
    await rm(dataDir, { recursive: true, force: true });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  console.log(JSON.stringify(await benchRuns(), null, 2));
}
