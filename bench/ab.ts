/**
 * Two builds of the server side by side, in one run: this machine's speed drifts by up to 2× within
 * an hour, so a change is judged by paired ratios of alternating runs, not by numbers from two runs.
 * Each round starts build A and build B in turn (the order alternates), each with an empty data dir:
 * a warm-up, `sequential` runs/wait one after another (p50), then `jobs` jobs (POST /threads +
 * POST /threads/{id}/runs/wait) at `concurrency`; server CPU per job from /proc, RSS after the load.
 * It prints each build's medians and, per metric, the ratios B/A of the rounds (median, min, max).
 * Then, for sequential latency (a few percent of which drown in the drift between rounds), both builds
 * run at once, each on its own server and data dir, and sequential waits alternate between them wait by
 * wait (A then B, then B then A), in several sessions of freshly started servers: `interleaved_sequential`
 * gives each build's p50, the median of the per-pair ratios B/A, and that median per session (the verdict:
 * the median of the sessions'). A/A (the same build twice) shows how far identical builds drift apart here.
 * Last, `start_instructions`: each build's start to its listening line on an empty data dir counted in
 * instructions (valgrind's callgrind, V8 in predictable mode; counts of a start repeat within 0.5 %, see support/instructions.ts), and B/A.
 *
 * Run: npm run bench -- ab
 *   AB_A, AB_B    directories holding a built main.js (default: this checkout's dist/, built first).
 *                 Another revision: `git worktree add /tmp/before <rev>`, link or install its
 *                 node_modules, `npm run build` there, then AB_A=/tmp/before/dist. Both run this
 *                 checkout's langgraph.json and graphs.
 *   AB_ROUNDS     rounds (default 6); AB_JOBS jobs per build and round (default 2,000);
 *   AB_CONCURRENCY (default 64); AB_SEQUENTIAL sequential waits per build and round (default 100);
 *   AB_INTERLEAVED pairs of interleaved sequential waits (default 1,000), over AB_SESSIONS sessions (default 5).
 */
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import type { BenchOptions } from "./support/options.js";
import { parseBenchOptions, positiveIntEnv } from "./support/options.js";
import { agentJobs, jsonClient, runPool, type JsonClient } from "./support/http.js";
import { buildServer, cpuMs, repoRoot, rssMiB, startBenchServer, type BenchServer } from "./support/server.js";
import { instructionsUnavailable, startInstructions } from "./support/instructions.js";
import { median, mediansOf, pairedRatios, perSecond, round2, summary } from "./support/stats.js";

interface Size {
  rounds: number;
  warmup: number;
  jobs: number;
  concurrency: number;
  sequential: number;
  interleaved: number;
  sessions: number;
}

interface Sample {
  runs_per_s: number;
  cpu_ms_per_job: number;
  rss_mib: number;
  sequential_p50_ms: number;
}

const METRICS = ["runs_per_s", "cpu_ms_per_job", "rss_mib", "sequential_p50_ms"] as const;

function sizeOf(options: BenchOptions, env: NodeJS.ProcessEnv): Size {
  const num = (name: string, fallback: number) => positiveIntEnv(env, name, fallback);
  if (options.tiny) return { rounds: 2, warmup: 10, jobs: 40, concurrency: 16, sequential: 5, interleaved: 6, sessions: 2 };
  return {
    rounds: num("AB_ROUNDS", 6),
    warmup: 600,
    jobs: num("AB_JOBS", 2_000),
    concurrency: num("AB_CONCURRENCY", 64),
    sequential: num("AB_SEQUENTIAL", 100),
    interleaved: num("AB_INTERLEAVED", 1_000),
    sessions: num("AB_SESSIONS", 5),
  };
}

interface StartedBuild {
  server: BenchServer;
  client: JsonClient;
  /** Stops the server and the client, and removes the data dir. */
  stop(): Promise<void>;
}

/** A built server (its main.js) and the environment its servers start with (AB_A_ENV / AB_B_ENV). */
interface Build {
  script: string;
  env: Record<string, string>;
}

/** A build's server on its own empty data dir, with a client of `connections` connections. */
async function startBuild({ script, env }: Build, connections: number, label = ""): Promise<StartedBuild> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), `agent-server-bench-ab-${label}`));
  // A server that fails to start leaves no empty data dir behind (as bench/runs.ts).
  const server = await startBenchServer(dataDir, { N_JOBS_PER_WORKER: "64", ...env }, [], script).catch(async (error: unknown) => {
    await rm(dataDir, { recursive: true, force: true });
    throw error;
  });
  const client = jsonClient(server.url, connections);
  return {
    server,
    client,
    async stop() {
      await server.stop();
      await client.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/** One build under one round's load, on its own empty data dir. */
async function measure(build: Build, size: Size): Promise<Sample> {
  const { server, client, stop } = await startBuild(build, Math.max(size.concurrency, 4));
  try {
    const { job, sequential: waitInTurn } = agentJobs(client);
    await runPool(size.warmup, Math.min(16, size.concurrency), job);
    const sequential = await waitInTurn(size.sequential);
    const cpu0 = await cpuMs(server.pid);
    const ms = await runPool(size.jobs, size.concurrency, job);
    const cpu = (await cpuMs(server.pid)) - cpu0;
    return {
      runs_per_s: perSecond(size.jobs, ms),
      cpu_ms_per_job: round2(cpu / size.jobs),
      rss_mib: await rssMiB(server.pid),
      // The p50 the other benchmarks report (summary's percentile).
      sequential_p50_ms: summary(sequential).p50_ms,
    };
  } finally {
    await stop();
  }
}

/**
 * Both builds at once, each on its own server: sequential waits alternate between them wait by wait (A then B,
 * then B then A), each on a thread made outside its timing, so a drift of the machine's speed touches both alike.
 * A server keeps for its whole life whatever favours or slows it here (where the scheduler runs it beside the
 * client and the other server): two servers of one build were seen 3 % apart for 1,500 pairs. So the pairs are
 * spread over `sessions`, each with both servers started afresh (which one starts first alternates), and the
 * verdict is the median of the sessions' per-pair medians.
 */
async function interleavedSequential(builds: Record<"A" | "B", Build>, size: Size): Promise<Record<string, unknown>> {
  const perSession = Math.max(1, Math.ceil(size.interleaved / size.sessions));
  const sessions: InterleavedSession[] = [];
  for (let session = 0; session < size.sessions; session++) {
    sessions.push(await interleavedSession(builds, size, perSession, session % 2 ? ["B", "A"] : ["A", "B"]));
  }
  const a = sessions.flatMap((s) => s.a);
  const b = sessions.flatMap((s) => s.b);
  const sessionRatios = sessions.map((s) => pairRatio(s.a, s.b));
  return {
    pairs: a.length,
    sessions: sessions.length,
    A_p50_ms: summary(a).p50_ms,
    B_p50_ms: summary(b).p50_ms,
    p50_ratio_b_over_a: round2(summary(b).p50_ms / summary(a).p50_ms),
    median_pair_ratio_b_over_a: pairRatio(a, b),
    session_pair_ratios: { median: round3(median(sessionRatios)), min: Math.min(...sessionRatios), max: Math.max(...sessionRatios), sessions: sessionRatios },
  };
}

interface InterleavedSession {
  a: number[];
  b: number[];
}

const round3 = (n: number) => Math.round(n * 1000) / 1000;

/** The median of the per-pair ratios b[i] / a[i], to three decimals. */
function pairRatio(a: number[], b: number[]): number {
  return round3(median(a.map((ms, i) => b[i] / ms)));
}

/** One session of interleaved waits: both servers started and warmed up (in `startOrder`), `pairs` pairs counted, stopped. */
async function interleavedSession(builds: Record<"A" | "B", Build>, size: Size, pairs: number, startOrder: ("A" | "B")[]): Promise<InterleavedSession> {
  const started: Partial<Record<"A" | "B", StartedBuild>> = {};
  try {
    for (const name of startOrder) started[name] = await startBuild(builds[name], 4, `${name}-`);
    const side = (build: StartedBuild | undefined) => ({ jobs: agentJobs(build!.client), latencies: [] as number[] });
    const sides = { A: side(started.A), B: side(started.B) };
    // Warmed up in the session's start order, so that neither build is always the one that waited idle while the
    // other warmed up; then a few pairs not counted, so that both are in the rhythm of the measured ones.
    for (const name of startOrder) {
      await runPool(size.warmup, 16, sides[name].jobs.job);
      await sides[name].jobs.sequential(Math.min(size.warmup, 100));
    }
    const uncounted = Math.min(20, pairs);
    for (let i = 0; i < uncounted + pairs; i++) {
      for (const s of i % 2 ? [sides.B, sides.A] : [sides.A, sides.B]) {
        const latencies = await s.jobs.sequential(1);
        if (i >= uncounted) s.latencies.push(...latencies);
      }
    }
    return { a: sides.A.latencies, b: sides.B.latencies };
  } finally {
    for (const build of Object.values(started)) await build.stop();
  }
}

/** Each build's start in instructions (one count each: they repeat within 0.5 %), and B/A. */
async function startInstructionsOf(builds: Record<"A" | "B", Build>, tiny: boolean): Promise<Record<string, unknown>> {
  // A minute under callgrind; the tiny run (npm test's) leaves it to `start --tiny`, which counts through the same code.
  if (tiny) return { skipped: "tiny mode: bench start --tiny counts a start the same way" };
  const unavailable = instructionsUnavailable();
  if (unavailable) return { unavailable };
  const A = await startInstructions(builds.A.script);
  const B = await startInstructions(builds.B.script);
  return { A, B, ratio_b_over_a: Math.round((B / A) * 10_000) / 10_000 };
}

/**
 * AB_A_ENV / AB_B_ENV: a JSON object of environment variables for that side's servers, so that one build can be
 * judged against itself with a setting on and off (e.g. AB_B_ENV='{"LANGGRAPH_AES_KEY":"..."}'). Only the names are printed.
 */
function envOf(name: string, text: string | undefined): Record<string, string> {
  if (!text) return {};
  const value: unknown = JSON.parse(text);
  if (typeof value !== "object" || value === null || Array.isArray(value) || !Object.values(value).every((v) => typeof v === "string")) {
    throw new Error(`${name}: expected a JSON object of strings, e.g. {"LANGGRAPH_AES_KEY":"..."}`);
  }
  return value as Record<string, string>;
}

/** A build directory's main.js, checked before any server starts. */
function scriptOf(dir: string | undefined): string {
  if (!dir) {
    buildServer();
    return path.join(repoRoot, "dist", "main.js");
  }
  const script = path.join(path.resolve(dir), "main.js");
  if (!existsSync(script)) throw new Error(`no built server at ${script} (AB_A / AB_B name a directory holding main.js, such as another checkout's dist/)`);
  return script;
}

export async function benchAB(options: BenchOptions = { tiny: false, big: false }, env: NodeJS.ProcessEnv = process.env): Promise<Record<string, unknown>> {
  const size = sizeOf(options, env);
  const builds = {
    A: { script: scriptOf(env.AB_A), env: envOf("AB_A_ENV", env.AB_A_ENV) },
    B: { script: scriptOf(env.AB_B), env: envOf("AB_B_ENV", env.AB_B_ENV) },
  };
  const samples: Record<"A" | "B", Sample[]> = { A: [], B: [] };
  for (let round = 0; round < size.rounds; round++) {
    // A first in even rounds, B first in odd ones: a drift within a round favours neither.
    for (const name of round % 2 ? (["B", "A"] as const) : (["A", "B"] as const)) samples[name].push(await measure(builds[name], size));
  }
  const medians = (list: Sample[]) => mediansOf(list, METRICS);
  const ratios = pairedRatios(samples.A, samples.B, METRICS);
  return {
    setup: {
      mode: options.tiny ? "tiny" : "full",
      A: builds.A.script,
      B: builds.B.script,
      ...(Object.keys(builds.A.env).length ? { A_env: Object.keys(builds.A.env) } : {}),
      ...(Object.keys(builds.B.env).length ? { B_env: Object.keys(builds.B.env) } : {}),
      rounds: size.rounds,
      job: "POST /threads + POST /threads/{id}/runs/wait on the agent graph",
      jobs_per_round: size.jobs,
      concurrency: size.concurrency,
      sequential_per_round: size.sequential,
      order: "A then B in even rounds, B then A in odd ones; each server on an empty data dir",
      interleaved: `then both builds at once, sequential waits alternating between them wait by wait, in ${size.sessions} sessions of newly started servers`,
    },
    A: medians(samples.A),
    B: medians(samples.B),
    ratio_b_over_a: ratios,
    interleaved_sequential: await interleavedSequential(builds, size),
    start_instructions: await startInstructionsOf(builds, options.tiny),
  };
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  console.log(JSON.stringify(await benchAB(parseBenchOptions(process.argv.slice(2))), null, 2));
}
