/**
 * What encryption at rest costs: the example graph's job (POST /threads + POST /threads/{id}/runs/wait) on two
 * servers, one started with LANGGRAPH_AES_KEY (the log sealed per stream, the read models' file and the key vault
 * encrypted), one without, loaded at the same time (see withAndWithoutKey). The engine benchmark runs the same
 * rounds and reports them as `with_key`; this runs them alone. Then `instructions`: the same job's cost in instructions,
 * counted by callgrind (see instructionsPerJob), a measure that does not drift with the machine's speed.
 * Run: npm run bench -- encryption [--tiny]
 */
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { agentJobs, jsonClient, runPool } from "./support/http.js";
import { parseBenchOptions, type BenchOptions } from "./support/options.js";
import { benchGraph, type GraphSource } from "./support/project.js";
import { instructionsUnavailable, serverLifeInstructions } from "./support/instructions.js";
import { benchServerEnv, buildServer, cpuMs, startBenchServer } from "./support/server.js";
import { mediansOf, pairedRatios, perSecond, summary } from "./support/stats.js";

/** A 32-byte AES key for the keyed server (a benchmark's data dir is thrown away). */
const BENCH_AES_KEY = "0123456789abcdef0123456789abcdef";

export interface KeyRoundsSize {
  rounds: number;
  warmup: number;
  jobs: number;
  sequential: number;
}

export function keyRoundsSize(options: BenchOptions): KeyRoundsSize {
  return options.tiny ? { rounds: 2, warmup: 10, jobs: 32, sequential: 5 } : { rounds: 6, warmup: 300, jobs: 1_000, sequential: 50 };
}

interface KeyRoundSample {
  cpu_ms_per_job: number;
  runs_per_s: number;
  sequential_p50_ms: number;
}

const KEY_METRICS = ["cpu_ms_per_job", "runs_per_s", "sequential_p50_ms"] as const;

/**
 * Two servers on their own data dirs, one started with LANGGRAPH_AES_KEY (the log, the read models and the key vault
 * encrypted), one without, loaded at the same time so that this machine's drift (up to 2× within an hour) touches
 * both alike. Each round: `jobs` jobs on each at once, 32 at a time on each (64 in all), with each server's CPU per
 * job over that window; then `sequential` pairs of waits, one on each, the order alternating pair by pair. The
 * ratios keyed ÷ plain are taken within each round.
 */
export async function withAndWithoutKey(source: GraphSource, dir: string, size: KeyRoundsSize): Promise<Record<string, unknown>> {
  const start = async (name: string, env: Record<string, string>) => {
    const server = await startBenchServer(path.join(dir, name), { N_JOBS_PER_WORKER: "64", LANGGRAPH_JSON: source.langgraphJson, ...env }, [], source.script);
    const client = jsonClient(server.url, 64);
    return { server, client, jobs: agentJobs(client), samples: [] as KeyRoundSample[] };
  };
  const plain = await start("plain", {});
  const keyed = await start("keyed", { LANGGRAPH_AES_KEY: BENCH_AES_KEY });
  const sides = [plain, keyed];
  try {
    await Promise.all(sides.map((side) => runPool(size.warmup, 16, side.jobs.job)));
    for (let round = 0; round < size.rounds; round++) {
      const cpu0 = await Promise.all(sides.map((side) => cpuMs(side.server.pid)));
      const elapsed = await Promise.all(sides.map((side) => runPool(size.jobs, 32, side.jobs.job)));
      const cpu1 = await Promise.all(sides.map((side) => cpuMs(side.server.pid)));
      const latencies: number[][] = [[], []];
      for (let pair = 0; pair < size.sequential; pair++) {
        for (const i of pair % 2 === 0 ? [0, 1] : [1, 0]) {
          const threadId = await sides[i].jobs.newThread();
          const t0 = performance.now();
          await sides[i].jobs.wait(threadId);
          latencies[i].push(performance.now() - t0);
        }
      }
      sides.forEach((side, i) =>
        side.samples.push({
          cpu_ms_per_job: (cpu1[i] - cpu0[i]) / size.jobs,
          runs_per_s: perSecond(size.jobs, elapsed[i]),
          sequential_p50_ms: summary(latencies[i]).p50_ms,
        }),
      );
    }
  } finally {
    for (const side of sides) {
      await side.server.stop();
      await side.client.close();
    }
  }
  return {
    method: `two servers loaded at once, one with LANGGRAPH_AES_KEY; ${size.rounds} rounds, each: ${size.jobs} jobs on each server at the same time (32 at a time on each), then ${size.sequential} pairs of sequential waits alternating between them; ratios keyed ÷ plain within each round`,
    plain: mediansOf(plain.samples, KEY_METRICS),
    keyed: mediansOf(keyed.samples, KEY_METRICS),
    keyed_over_plain: pairedRatios(plain.samples, keyed.samples, KEY_METRICS),
    target: "within 10 %: CPU per job and sequential p50 ≤ 1.10 × plain, runs/s ≥ 0.90 × plain",
  };
}

/** Sequential jobs of the two lives each server's count is taken over (see instructionsPerJob). */
const INSTRUCTION_JOBS = { few: 20, many: 220 } as const;

/**
 * One job's instructions on a server with the key and on one without: each server's whole life counted by callgrind
 * (node --predictable, every thread) twice, with `few` and with `many` sequential jobs (the example graph's, on new
 * threads); what the extra jobs add, divided by their number, is one job, start-up and shutdown cancelled out. Counts
 * of one life repeat within about 0.5 % however busy the machine is, where its CPU time drifts by up to 2×, so a
 * change of a point or two in the key's cost shows here. Instructions are not time: cache misses, system calls and
 * threads V8 does not run under --predictable make CPU time per job differ (the rounds above measure that).
 */
async function instructionsPerJob(source: GraphSource, dir: string): Promise<Record<string, unknown>> {
  const unavailable = instructionsUnavailable();
  if (unavailable) return { unavailable };
  const script = source.script ?? (buildServer(), "dist/main.js");
  const life = (name: string, env: Record<string, string>, jobs: number) =>
    serverLifeInstructions(script, benchServerEnv(path.join(dir, `${name}-${jobs}-jobs`), { LANGGRAPH_JSON: source.langgraphJson, ...env }), async (url) => {
      const client = jsonClient(url, 1);
      try {
        await agentJobs(client).sequential(jobs);
      } finally {
        await client.close();
      }
    });
  const perJob = async (name: string, env: Record<string, string>) => {
    process.stderr.write(`[encryption] instructions: ${name}\n`);
    const few = await life(name, env, INSTRUCTION_JOBS.few);
    const many = await life(name, env, INSTRUCTION_JOBS.many);
    return (many - few) / (INSTRUCTION_JOBS.many - INSTRUCTION_JOBS.few);
  };
  const plain = await perJob("plain", {});
  const keyed = await perJob("keyed", { LANGGRAPH_AES_KEY: BENCH_AES_KEY });
  return {
    method: `callgrind, node --predictable: each server's life with ${INSTRUCTION_JOBS.few} and with ${INSTRUCTION_JOBS.many} sequential jobs; the difference over ${INSTRUCTION_JOBS.many - INSTRUCTION_JOBS.few} jobs`,
    plain_per_job: Math.round(plain),
    keyed_per_job: Math.round(keyed),
    keyed_over_plain: Math.round((keyed / plain) * 1000) / 1000,
  };
}

export async function benchEncryption(options: BenchOptions = { tiny: false, big: false }): Promise<Record<string, unknown>> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "agent-server-bench-encryption-"));
  try {
    const source = await benchGraph();
    const rounds = await withAndWithoutKey(source, dir, keyRoundsSize(options));
    // Four server lives under callgrind take minutes: not at the size that only checks the benchmark runs.
    const instructions = options.tiny ? { skipped: "--tiny" } : await instructionsPerJob(source, dir);
    return { graph: source.describe, ...rounds, instructions };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  console.log(JSON.stringify(await benchEncryption(parseBenchOptions(process.argv.slice(2))), null, 2));
}
