/**
 * Engine benchmark: how close a durable run comes to the graph itself, measured in one process run.
 *   - the anchor: the example graph `agent` (src/graphs/agent.ts) compiled with an in-memory
 *     `MemorySaver` and invoked in this process, a new thread per invoke (sequential). Measured
 *     before and after the server load, and the mean of the two taken, so a machine whose speed
 *     drifts during the run does not favour either side;
 *   - the server (built `dist/main.js`, SQLite synchronous=FULL, `node --cpu-prof`): per job,
 *     `POST /threads` then `POST /threads/{id}/runs/wait` on it, at concurrency 16 and 64;
 *     sequential `runs/wait` latency (thread created outside the timing);
 *   - their ratio at each concurrency;
 *   - server RSS right after the load and after an idle pause (20 s; tiny: 3 s);
 *   - server CPU per run (utime + stime of /proc/<pid>/stat over the c16 and c64 windows), and
 *     that CPU split by phase: the self-time of the server's `--cpu-prof` samples taken inside the
 *     load windows, each charged to a phase by its source path (see bench/support/cpu-profile.ts).
 *     The profile counts wall-clock samples of the main thread; the shares are applied to the
 *     measured CPU per run;
 *   - start to `/ok` of that server (empty data dir, profiling on: see `start` for the clean number).
 * Run: npm run bench -- engine [--tiny]
 */
import { randomUUID } from "node:crypto";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { MemorySaver } from "@langchain/langgraph";
import { jsonClient, runPool } from "./support/http.js";
import { attributeProfile, readProfile, RUN_PHASES } from "./support/cpu-profile.js";
import { parseBenchOptions, type BenchOptions } from "./support/options.js";
import { cpuMs, repoRoot, rssMiB, startBenchServer, waitOk } from "./support/server.js";
import { perSecond, round2, summary } from "./support/stats.js";

const FULL = { warmup: 300, invokes: 2_000, sequential: 200, perConcurrency: 2_000, idleMs: 20_000 };
const TINY = { warmup: 20, invokes: 50, sequential: 10, perConcurrency: 64, idleMs: 3_000 };

const input = { messages: [{ role: "user", content: "hello" }] };

/** Invokes of the example graph in this process per second, and the mean ms per invoke. */
async function engineRate(n: number): Promise<{ invokes_per_s: number; mean_ms: number }> {
  const { builder } = (await import(pathToFileURL(path.join(repoRoot, "src", "graphs", "agent.ts")).href)) as {
    builder: { compile(o: { checkpointer: MemorySaver }): { invoke(input: unknown, config: unknown): Promise<unknown> } };
  };
  const graph = builder.compile({ checkpointer: new MemorySaver() });
  const invoke = () => graph.invoke(input, { configurable: { thread_id: randomUUID() } });
  for (let i = 0; i < Math.min(100, n); i++) await invoke();
  const t0 = performance.now();
  for (let i = 0; i < n; i++) await invoke();
  const ms = performance.now() - t0;
  return { invokes_per_s: perSecond(n, ms), mean_ms: round2(ms / n) };
}

export async function benchEngine(options: BenchOptions = { tiny: false, big: false }): Promise<Record<string, unknown>> {
  const size = options.tiny ? TINY : FULL;
  const dataDir = await mkdtemp(path.join(os.tmpdir(), "agent-server-bench-engine-"));
  const profDir = path.join(dataDir, "cpu-prof");

  const engineBefore = await engineRate(size.invokes);

  // The profile is written when the server exits; its clock is CLOCK_MONOTONIC, as process.hrtime is.
  const nowUs = () => Number(process.hrtime.bigint() / 1000n);
  const server = await startBenchServer(path.join(dataDir, "data"), { N_JOBS_PER_WORKER: "64" }, ["--cpu-prof", `--cpu-prof-dir=${profDir}`]).catch(async (error: unknown) => {
    await rm(dataDir, { recursive: true, force: true });
    throw error;
  });
  const client = jsonClient(server.url, 128);
  let stopped = false;
  try {
    const okMs = server.startMs + (await waitOk(server.url));
    const newThread = async () => (await client.post<{ thread_id: string }>("/threads", {})).thread_id;
    const wait = async (threadId: string) => {
      const out = await client.post<{ messages?: { content?: unknown }[] }>(`/threads/${threadId}/runs/wait`, { assistant_id: "agent", input });
      if (out.messages?.at(-1)?.content !== "You said: hello") throw new Error(`unexpected result ${JSON.stringify(out)}`);
    };
    const job = async () => wait(await newThread());

    await runPool(size.warmup, 16, job); // JIT, graph, SQLite pages

    const latencies: number[] = [];
    for (let i = 0; i < size.sequential; i++) {
      const tid = await newThread();
      const t0 = performance.now();
      await wait(tid);
      latencies.push(performance.now() - t0);
    }

    const windows: { fromUs: number; toUs: number }[] = [];
    const rate: Record<string, number> = {};
    let cpu = 0;
    for (const c of [16, 64]) {
      const cpu0 = await cpuMs(server.pid);
      const fromUs = nowUs();
      const ms = await runPool(size.perConcurrency, c, job);
      windows.push({ fromUs, toUs: nowUs() });
      cpu += (await cpuMs(server.pid)) - cpu0;
      rate[`c${c}`] = perSecond(size.perConcurrency, ms);
    }
    const cpuPerRun = cpu / (2 * size.perConcurrency);
    const rssAfterLoad = await rssMiB(server.pid);
    await new Promise((r) => setTimeout(r, size.idleMs));
    const rssAfterIdle = await rssMiB(server.pid);

    await server.stop();
    stopped = true;
    const engineAfter = await engineRate(size.invokes);
    const enginePerS = Math.round((engineBefore.invokes_per_s + engineAfter.invokes_per_s) / 2);
    const engineMs = round2((engineBefore.mean_ms + engineAfter.mean_ms) / 2);

    const profiles = (await readdir(profDir)).filter((f) => f.endsWith(".cpuprofile"));
    const phases: Record<string, number> = {};
    // Only the server's own profile: a worker thread (the webhook sender) writes a second file.
    const main = profiles.map((f) => readProfile(path.join(profDir, f))).sort((a, b) => b.samples.length - a.samples.length)[0];
    for (const w of windows) for (const [k, v] of Object.entries(attributeProfile(main, RUN_PHASES, w))) phases[k] = (phases[k] ?? 0) + v;
    const sampled = Object.entries(phases).filter(([k]) => k !== "(idle)").reduce((a, [, v]) => a + v, 0);
    const perRun = Object.fromEntries(
      Object.entries(phases)
        .filter(([k]) => k !== "(idle)")
        .sort((a, b) => b[1] - a[1])
        .map(([k, v]) => [k, { share: round2(v / sampled), cpu_ms_per_run: round2((v / sampled) * cpuPerRun) }]),
    );
    const sequential = summary(latencies);
    return {
      setup: {
        mode: options.tiny ? "tiny" : "full",
        graph: "agent (src/graphs/agent.ts)",
        engine: "builder.compile({ checkpointer: new MemorySaver() }).invoke, a new thread_id per invoke, sequential, in this process",
        server: "dist/main.js, SQLite synchronous=FULL, N_JOBS_PER_WORKER=64, node --cpu-prof; a job = POST /threads + POST /threads/{id}/runs/wait",
        phases_method: "self-time of the server's --cpu-prof samples inside the c16 and c64 windows, charged by source path (bundle frames mapped to src/ through the source map; native and node: frames to their nearest caller with a path); shares applied to the measured CPU per run",
      },
      engine_invokes_per_s: { before: engineBefore.invokes_per_s, after: engineAfter.invokes_per_s, mean: enginePerS },
      server_runs_per_s: rate,
      ratio_server_to_engine: { c16: round2(rate.c16 / enginePerS), c64: round2(rate.c64 / enginePerS) },
      sequential_wait: { ...sequential, engine_invoke_mean_ms: engineMs, target_p50_ms: round2(1.5 * engineMs + 1) },
      server_rss_mib: { after_load: rssAfterLoad, after_idle: rssAfterIdle, idle_ms: size.idleMs },
      server_cpu_ms_per_run: round2(cpuPerRun),
      cpu_by_phase: perRun,
      start_to_ok_ms_profiled: Math.round(okMs),
    };
  } finally {
    if (!stopped) await server.stop();
    await client.close();
    await rm(dataDir, { recursive: true, force: true });
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  console.log(JSON.stringify(await benchEngine(parseBenchOptions(process.argv.slice(2))), null, 2));
}
