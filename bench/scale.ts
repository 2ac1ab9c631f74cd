/**
 * Scale benchmark: a store filled through the HTTP API, then a restart on it.
 *   fill:    POST /threads with metadata {user: "u<k mod 1000>", n: k} (concurrency 32) up to THREADS,
 *            then RUNS runs via POST /threads/{id}/runs/wait with the example graph `agent`
 *   measures (each against its target, with pass/fail):
 *     - idle RSS of the server on an empty store (RSS is read at once and again once V8 returned
 *       the garbage of start-up or of the load, up to 30 s later; the targets check the idle value)
 *     - POST /threads throughput on an empty store and at the filled size, and the degradation
 *     - runs.wait latency (sequential p50/p99), and at concurrency 16 the server CPU per run
 *     - RSS while filled
 *     - POST /threads/search {metadata: {user}, limit: 10} and POST /threads/count p50/p99
 *     - restart (SIGTERM, start on the same DATA_DIR): time to the first GET /ok 200 (the server
 *       listens only once its read models caught up; the counts are checked after it), RSS after it
 *     - the metadata search after the restart beside GET /ok: once the server's start-up is over (its
 *       graph runtime ready, then 1 s), searches one at a time, each followed by a GET /ok on the same
 *       connection; `cold` is the first COLD_QUERIES of them (nothing of the read models cached, the route
 *       never run), `warm` the next `queries`. Each gives search p50, /ok p50 and their difference, whose
 *       target is ≤ 3 ms (the answer's own work beside the server's least: a search is an /ok plus its query)
 *     - full read-model rebuild events/s, if the project has an `npm run rebuild` script (else null)
 * Sizes: 100,000 threads / 10,000 runs; `--big` 1,000,000 threads; `--tiny` 2,000 threads / 200 runs;
 * SCALE_THREADS=<n> sets the threads of the size chosen (at least its warm-up and two probes).
 * SCALE_COMPARE=<dir holding a built main.js> (another revision's dist/) adds `compare`: after the restart,
 * SCALE_COMPARE_ROUNDS (4) rounds each restart this build and that one in turn (the order alternating),
 * each on its own copy of the filled data dir (the other build first starts once on its copy, rebuilding
 * its read models if their schema differs), and measure the search beside /ok as above: each build's
 * medians of the rounds and the ratios this/other per round (median, min, max).
 * Run: npm run bench -- scale [--big | --tiny]   (prints one JSON object)
 */
import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { cp, mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { Pool } from "undici";
import { jsonClient, runPool, type JsonClient } from "./support/http.js";
import { parseBenchOptions, positiveIntEnv, type BenchOptions } from "./support/options.js";
import { cpuMs, repoRoot, rssNowAndSettled, startBenchServer, waitOk, type BenchServer } from "./support/server.js";
import { check, findEventsPerSecond, median, pairedRatios, perSecond, round2, summary, tally, type Checked, type LatencySummary } from "./support/stats.js";

const SIZES = {
  full: { threads: 100_000, runs: 10_000, probe: 5_000, warmup: 1_000, sequentialRuns: 200, queries: 300 },
  big: { threads: 1_000_000, runs: 10_000, probe: 5_000, warmup: 1_000, sequentialRuns: 200, queries: 300 },
  tiny: { threads: 2_000, runs: 200, probe: 300, warmup: 300, sequentialRuns: 20, queries: 30 },
};
/** The first searches after a restart, counted as `cold`. */
const COLD_QUERIES = { full: 20, big: 20, tiny: 10 };
/** How far a search's p50 may lie above GET /ok's, cold and warm. */
const SEARCH_OVER_OK_MAX_MS = 3;
const FILL_CONCURRENCY = 32;
const RUN_CONCURRENCY = 16;
const USERS = 1000;
/** Quiet time before reading idle RSS: start-up garbage is collected lazily. A measurement, not a synchronisation. */
const IDLE_SETTLE_MS = 1000;
/** How long RSS may take to settle once idle (V8's memory reducer); none in tiny mode. */
const SETTLE_MAX_MS = { full: 30_000, big: 30_000, tiny: 0 };

const input = { messages: [{ role: "user", content: "hello" }] };

const progress = (msg: string) => process.stderr.write(`[scale] ${msg}\n`);

/** Threads k = from … to-1 get metadata {user: "u<k mod 1000>", n: k}; the ids of k < keep.length are kept. */
async function createThreads(http: JsonClient, from: number, to: number, keep: string[]): Promise<number> {
  const step = Math.max(1, Math.floor((to - from) / 10));
  return runPool(to - from, FILL_CONCURRENCY, async (i) => {
    const k = from + i;
    const threadId = randomUUID();
    await http.post("/threads", { thread_id: threadId, metadata: { user: `u${k % USERS}`, n: k } });
    if (k < keep.length) keep[k] = threadId;
    if (i > 0 && i % step === 0 && to - from >= 10_000) progress(`threads ${k}/${to}`);
  });
}

/** Threads with metadata user u<user> among k = 0 … total-1. */
function expectedPerUser(total: number, user: number): number {
  return Math.floor(total / USERS) + (user < total % USERS ? 1 : 0);
}

async function runWait(http: JsonClient, threadId: string): Promise<number> {
  const t0 = performance.now();
  const result = await http.post<{ messages?: { content?: unknown }[] }>(`/threads/${threadId}/runs/wait`, { assistant_id: "agent", input });
  const ms = performance.now() - t0;
  if (!JSON.stringify(result).includes("You said: hello")) throw new Error(`unexpected runs.wait result ${JSON.stringify(result).slice(0, 300)}`);
  return ms;
}

/** Sequential latencies of `query(i)` after a short warm-up. */
async function latencies(n: number, query: (i: number) => Promise<void>): Promise<number[]> {
  for (let i = 0; i < Math.min(20, n); i++) await query(i);
  const ms: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await query(i);
    ms.push(performance.now() - t0);
  }
  return ms;
}

/** Waits until the server's start-up is over: /info reports its graph runtime ready (or reports none). */
async function waitStartedUp(url: string, timeoutMs = 60_000): Promise<void> {
  const pool = new Pool(url, { connections: 1 });
  try {
    const t0 = performance.now();
    for (;;) {
      const res = await pool.request({ path: "/info", method: "GET" });
      const info = (await res.body.json()) as { graph_runtime?: string };
      if (res.statusCode === 200 && (info.graph_runtime === undefined || info.graph_runtime === "ready")) return;
      if (performance.now() - t0 > timeoutMs) throw new Error(`${url}: graph runtime not ready within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 20));
    }
  } finally {
    await pool.close();
  }
}

interface BesideOk {
  search: LatencySummary;
  ok: LatencySummary;
  /** Search p50 − /ok p50. */
  over_ok_ms: number;
}

/**
 * Metadata searches (limit 10) on a server just (re)started, once its start-up is over, each followed by
 * a GET /ok on the same keep-alive connection: the first `cold` (the read models' pages, statements and
 * the route untouched since the start), then `warm` more.
 */
async function searchBesideOk(url: string, threads: number, cold: number, warm: number): Promise<{ cold: BesideOk; warm: BesideOk }> {
  await waitStartedUp(url);
  await new Promise((r) => setTimeout(r, IDLE_SETTLE_MS));
  const pool = new Pool(url, { connections: 1, pipelining: 1, keepAliveTimeout: 30_000 });
  const timed = async (path: string, body: unknown, checkBody: (text: string) => void): Promise<number> => {
    const t0 = performance.now();
    const res =
      body === undefined
        ? await pool.request({ path, method: "GET" })
        : await pool.request({ path, method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    const text = await res.body.text();
    const ms = performance.now() - t0;
    if (res.statusCode !== 200) throw new Error(`${path}: HTTP ${res.statusCode} ${text.slice(0, 300)}`);
    checkBody(text);
    return ms;
  };
  // Users other than the filled server's first queries, in the same spread.
  const user = (i: number) => (i * 7919 + 500) % USERS;
  const samples = { cold: { search: [] as number[], ok: [] as number[] }, warm: { search: [] as number[], ok: [] as number[] } };
  try {
    for (let i = 0; i < cold + warm; i++) {
      const into = i < cold ? samples.cold : samples.warm;
      const u = user(i);
      into.search.push(
        await timed("/threads/search", { metadata: { user: `u${u}` }, limit: 10 }, (text) => {
          const n = (JSON.parse(text) as unknown[]).length;
          if (n !== Math.min(10, expectedPerUser(threads, u))) throw new Error(`search u${u} returned ${n} threads`);
        }),
      );
      into.ok.push(await timed("/ok", undefined, () => {}));
    }
  } finally {
    await pool.close();
  }
  const besideOk = (s: { search: number[]; ok: number[] }): BesideOk => {
    const search = summary(s.search);
    const ok = summary(s.ok);
    return { search, ok, over_ok_ms: round2(search.p50_ms - ok.p50_ms) };
  };
  return { cold: besideOk(samples.cold), warm: besideOk(samples.warm) };
}

const COMPARED = ["cold_search_p50_ms", "cold_ok_p50_ms", "cold_over_ok_ms", "warm_search_p50_ms", "warm_ok_p50_ms", "warm_over_ok_ms"] as const;
type ComparedSample = Record<(typeof COMPARED)[number], number>;

/**
 * This build beside another one (`otherDir`: its main.js) on copies of one filled data dir: rounds of
 * restarts, the order alternating, each measuring the search beside /ok after the start.
 */
async function compareBuilds(
  dataDir: string,
  otherDir: string,
  rounds: number,
  threads: number,
  cold: number,
  warm: number,
  env: Record<string, string>,
): Promise<Record<string, unknown>> {
  const other = path.join(path.resolve(otherDir), "main.js");
  if (!existsSync(other)) throw new Error(`no built server at ${other} (SCALE_COMPARE names a directory holding main.js, such as another checkout's dist/)`);
  const otherData = `${dataDir}-compare`;
  await cp(dataDir, otherData, { recursive: true });
  try {
    const sides = { this: { dir: dataDir, script: undefined as string | undefined }, other: { dir: otherData, script: other } };
    // The other build's first start on its copy rebuilds its read models when their schema differs from this build's.
    const first = await startBenchServer(otherData, env, [], other);
    await first.stop();
    const samples: Record<"this" | "other", ComparedSample[]> = { this: [], other: [] };
    for (let round = 0; round < rounds; round++) {
      for (const name of round % 2 ? (["other", "this"] as const) : (["this", "other"] as const)) {
        progress(`compare round ${round + 1}/${rounds}: ${name}`);
        const server = await startBenchServer(sides[name].dir, env, [], sides[name].script);
        try {
          await waitOk(server.url);
          const m = await searchBesideOk(server.url, threads, cold, warm);
          samples[name].push({
            cold_search_p50_ms: m.cold.search.p50_ms,
            cold_ok_p50_ms: m.cold.ok.p50_ms,
            cold_over_ok_ms: m.cold.over_ok_ms,
            warm_search_p50_ms: m.warm.search.p50_ms,
            warm_ok_p50_ms: m.warm.ok.p50_ms,
            warm_over_ok_ms: m.warm.over_ok_ms,
          });
        } finally {
          await server.stop();
        }
      }
    }
    const medians = (list: ComparedSample[]) => Object.fromEntries(COMPARED.map((m) => [m, round2(median(list.map((s) => s[m])))]));
    return {
      other_main: other,
      rounds,
      this: medians(samples.this),
      other: medians(samples.other),
      ratio_this_over_other: pairedRatios(samples.other, samples.this, ["cold_search_p50_ms", "warm_search_p50_ms"]),
    };
  } finally {
    await rm(otherData, { recursive: true, force: true });
  }
}

/** `npm run rebuild` with DATA_DIR, when package.json has it: its events/s (the first "events…per…s" number of its JSON). */
async function rebuildEventsPerSecond(dataDir: string): Promise<{ events_per_s: number | null; output?: unknown; note?: string }> {
  const pkg = JSON.parse(await readFile(path.join(repoRoot, "package.json"), "utf8")) as { scripts?: Record<string, string> };
  if (!pkg.scripts?.rebuild) return { events_per_s: null, note: "no `npm run rebuild` script" };
  const { stdout } = await promisify(execFile)("npm", ["run", "rebuild", "--silent"], {
    cwd: repoRoot,
    env: { ...process.env, DATA_DIR: dataDir },
    maxBuffer: 64 * 1024 * 1024,
    timeout: 30 * 60_000,
  });
  const json = stdout.slice(stdout.indexOf("{"), stdout.lastIndexOf("}") + 1);
  const output = JSON.parse(json) as unknown;
  return { events_per_s: findEventsPerSecond(output), output };
}

export async function benchScale(options: BenchOptions = { tiny: false, big: false }): Promise<Record<string, unknown>> {
  const mode = options.tiny ? "tiny" : options.big ? "big" : "full";
  const size = { ...SIZES[mode], threads: positiveIntEnv(process.env, "SCALE_THREADS", SIZES[mode].threads) };
  if (size.threads < size.warmup + 2 * size.probe)
    throw new Error(`SCALE_THREADS must be at least ${size.warmup + 2 * size.probe} at this size (warm-up and two probes)`);
  size.runs = Math.min(size.runs, size.threads);
  const dataDir = await mkdtemp(path.join(os.tmpdir(), "agent-server-bench-scale-"));
  const env = { N_JOBS_PER_WORKER: process.env.N_JOBS_PER_WORKER ?? "16" };
  let server: BenchServer | undefined;
  let http: JsonClient | undefined;
  try {
    server = await startBenchServer(dataDir, env);
    http = jsonClient(server.url, FILL_CONCURRENCY);
    await waitOk(server.url);
    await new Promise((r) => setTimeout(r, IDLE_SETTLE_MS));
    const idleRss = await rssNowAndSettled(server.pid, SETTLE_MAX_MS[mode]);

    // Threads: warm-up, a probe on the (nearly) empty store, the fill, a probe at the filled size.
    const runThreads: string[] = new Array(size.runs);
    await createThreads(http, 0, size.warmup, runThreads);
    const emptyMs = await createThreads(http, size.warmup, size.warmup + size.probe, runThreads);
    progress(`filling ${size.threads} threads`);
    const fillFrom = size.warmup + size.probe;
    const fillTo = size.threads - size.probe;
    const fillMs = await createThreads(http, fillFrom, fillTo, runThreads);
    const filledMs = await createThreads(http, fillTo, size.threads, runThreads);
    const createEmpty = perSecond(size.probe, emptyMs);
    const createFilled = perSecond(size.probe, filledMs);

    // Runs: a few to warm up, a sequential sample for latency, the rest at concurrency 16 for CPU per run.
    progress(`${size.runs} runs`);
    const warmRuns = Math.min(20, size.runs);
    for (let i = 0; i < warmRuns; i++) await runWait(http, runThreads[i]);
    const sequential: number[] = [];
    for (let i = warmRuns; i < warmRuns + size.sequentialRuns; i++) sequential.push(await runWait(http, runThreads[i]));
    const concurrentFrom = warmRuns + size.sequentialRuns;
    const concurrent: number[] = [];
    const cpu0 = await cpuMs(server.pid);
    const concurrentMs = await runPool(size.runs - concurrentFrom, RUN_CONCURRENCY, async (i) => {
      concurrent.push(await runWait(http!, runThreads[concurrentFrom + i]));
    });
    const cpuPerRun = ((await cpuMs(server.pid)) - cpu0) / concurrent.length;
    const filledRss = await rssNowAndSettled(server.pid, SETTLE_MAX_MS[mode]);

    // Metadata search (limit 10) and count, on users spread over the 1000.
    const user = (i: number) => (i * 7919) % USERS;
    const search = await latencies(size.queries, async (i) => {
      const page = await http!.post<unknown[]>("/threads/search", { metadata: { user: `u${user(i)}` }, limit: 10 });
      if (page.length !== Math.min(10, expectedPerUser(size.threads, user(i)))) throw new Error(`search u${user(i)} returned ${page.length} threads`);
    });
    const count = await latencies(size.queries, async (i) => {
      const n = await http!.post<number>("/threads/count", { metadata: { user: `u${user(i)}` } });
      if (n !== expectedPerUser(size.threads, user(i))) throw new Error(`count u${user(i)} = ${n}, expected ${expectedPerUser(size.threads, user(i))}`);
    });

    // Restart on the same data directory.
    progress("restart");
    await http.close();
    http = undefined;
    await server.stop();
    server = undefined;
    const restarted = await startBenchServer(dataDir, env);
    server = restarted;
    const restartMs = restarted.startMs + (await waitOk(restarted.url));
    // Before anything else reads the read models: the search just after a restart, beside /ok.
    const afterRestart = await searchBesideOk(restarted.url, size.threads, COLD_QUERIES[mode], size.queries);
    http = jsonClient(restarted.url, 1);
    const total = await http.post<number>("/threads/count", {});
    if (total !== size.threads) throw new Error(`after restart: ${total} threads, expected ${size.threads}`);
    const restartRss = await rssNowAndSettled(restarted.pid, SETTLE_MAX_MS[mode]);
    await http.close();
    http = undefined;
    await restarted.stop();
    server = undefined;

    const compareDir = process.env.SCALE_COMPARE;
    const compare = compareDir
      ? await compareBuilds(dataDir, compareDir, positiveIntEnv(process.env, "SCALE_COMPARE_ROUNDS", 4), size.threads, COLD_QUERIES[mode], size.queries, env)
      : undefined;

    progress("rebuild");
    const rebuild = await rebuildEventsPerSecond(dataDir);

    const searchS = summary(search);
    const countS = summary(count);
    const waitS = summary(sequential);
    const degradation = round2((1 - createFilled / createEmpty) * 100);
    const checks: Record<string, Checked> = {
      rss_filled_mib: check(filledRss.settled_mib, { max: 150, unit: "MiB (idle once filled; right after the load: see details.rss)" }),
      rss_after_restart_mib: check(restartRss.settled_mib, { max: 150, unit: "MiB (idle after the restart)" }),
      idle_rss_empty_store_mib: check(idleRss.settled_mib, { max: 110, unit: "MiB (idle; 1 s after start: see details.rss)" }),
      restart_to_ok_ms: check(Math.round(restartMs), { max: 1000, unit: "ms" }),
      rebuild_events_per_s: check(rebuild.events_per_s, { min: 50_000, unit: "events/s" }),
      search_metadata_limit10_p50_ms: check(searchS.p50_ms, { max: 5, unit: "ms" }),
      count_metadata_p50_ms: check(countS.p50_ms, { max: 5, unit: "ms" }),
      search_after_restart_cold_over_ok_ms: check(afterRestart.cold.over_ok_ms, {
        max: SEARCH_OVER_OK_MAX_MS,
        unit: `ms over /ok (p50s, first ${COLD_QUERIES[mode]} searches after the restart)`,
      }),
      search_after_restart_warm_over_ok_ms: check(afterRestart.warm.over_ok_ms, { max: SEARCH_OVER_OK_MAX_MS, unit: "ms over /ok (p50s, after those)" }),
      threads_create_filled_per_s: check(createFilled, { min: 4000, unit: "threads/s" }),
      threads_create_degradation_pct: check(degradation, { max: 20, unit: "% (filled vs empty store)" }),
      runs_wait_p50_ms: check(waitS.p50_ms, { max: 8, unit: "ms (sequential)" }),
      server_cpu_ms_per_run: check(round2(cpuPerRun), { max: 3, unit: "ms (concurrency 16, echo graph)" }),
    };
    return {
      setup: {
        mode,
        threads: size.threads,
        runs: size.runs,
        users: USERS,
        store: "sqlite",
        graph: "agent (src/graphs/agent.ts)",
        fill_concurrency: FILL_CONCURRENCY,
        run_concurrency: RUN_CONCURRENCY,
        n_jobs_per_worker: Number(env.N_JOBS_PER_WORKER),
      },
      checks,
      result: tally(checks),
      details: {
        fill_threads_per_s: perSecond(fillTo - fillFrom, fillMs),
        threads_create_per_s: { empty_store: createEmpty, filled: createFilled, probe: size.probe, concurrency: FILL_CONCURRENCY },
        runs_wait_sequential: waitS,
        runs_wait_c16: { ...summary(concurrent), runs_per_s: perSecond(concurrent.length, concurrentMs) },
        search_metadata_limit10: searchS,
        count_metadata: countS,
        search_after_restart: afterRestart,
        rss: { empty_store: idleRss, filled_after_load: filledRss, after_restart: restartRss },
        restart: { to_listening_ms: Math.round(restarted.startMs), to_ok_ms: Math.round(restartMs) },
        rebuild,
        ...(compare ? { compare } : {}),
      },
    };
  } finally {
    await http?.close();
    await server?.stop();
    await rm(dataDir, { recursive: true, force: true });
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  console.log(JSON.stringify(await benchScale(parseBenchOptions(process.argv.slice(2))), null, 2));
}
