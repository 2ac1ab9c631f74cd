/**
 * The graph in the user's project beside the graph in this repository, in one run, with one build:
 *   - `repo`: this checkout's dist/main.js on this repository's langgraph.json (src/graphs/agent.ts on this
 *     repository's node_modules);
 *   - `project`: the user's setup, a project folder with a copy of that graph, its own copies of
 *     @langchain/langgraph, @langchain/core and @langchain/langgraph-checkpoint (the rest linked), and the
 *     server installed there as a package, so its @langchain/* peers are the project's (one LangGraph);
 *   - `project_beside`: the same project served by this checkout's dist/main.js (LANGGRAPH_JSON pointing
 *     into the project), the setup before the package existed: the process holds two copies of LangGraph.
 * (bench/support/project.ts). Each round starts the three in turn (the order rotates each round), each on
 * an empty data dir: a warm-up, `sequential` runs/wait one after another (p50, each on a thread made
 * outside its timing), then `jobs` jobs (POST /threads + POST /threads/{id}/runs/wait) at `concurrency` 64,
 * with the server's CPU (utime + stime of /proc/<pid>/stat) over the jobs. Prints each side's medians and,
 * per metric, the ratios to repo of the rounds (median, min, max): this machine's speed drifts, so the
 * paired ratio is the verdict.
 *
 * Run: npm run bench -- project-vs-repo [--tiny]
 *   PVR_ROUNDS (default 6), PVR_JOBS jobs per side and round (default 1,500), PVR_SEQUENTIAL (default 100).
 */
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { agentJobs, jsonClient, runPool } from "./support/http.js";
import { parseBenchOptions, positiveIntEnv, type BenchOptions } from "./support/options.js";
import { makeBenchProject, REPO_GRAPH, type GraphSource } from "./support/project.js";
import { cpuMs, rssMiB, startBenchServer, startScriptNodeFlags } from "./support/server.js";
import { mediansOf, pairedRatios, perSecond, round2, summary } from "./support/stats.js";

interface Size {
  rounds: number;
  warmup: number;
  jobs: number;
  concurrency: number;
  sequential: number;
}

interface Sample {
  cpu_ms_per_job: number;
  runs_per_s: number;
  sequential_p50_ms: number;
  rss_mib: number;
  start_ms: number;
}

const METRICS = ["cpu_ms_per_job", "runs_per_s", "sequential_p50_ms", "rss_mib", "start_ms"] as const;
const SIDES = ["repo", "project", "project_beside"] as const;
type Side = (typeof SIDES)[number];

function sizeOf(options: BenchOptions, env: NodeJS.ProcessEnv): Size {
  const num = (name: string, fallback: number) => positiveIntEnv(env, name, fallback);
  if (options.tiny) return { rounds: 2, warmup: 20, jobs: 64, concurrency: 64, sequential: 5 };
  return { rounds: num("PVR_ROUNDS", 6), warmup: 300, jobs: num("PVR_JOBS", 1_500), concurrency: 64, sequential: num("PVR_SEQUENTIAL", 100) };
}

/** One server on `source`'s langgraph.json, on its own empty data dir, under one round's load. */
async function measure(source: GraphSource, size: Size): Promise<Sample> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), `agent-server-bench-pvr-${source.kind}-`));
  try {
    const server = await startBenchServer(dataDir, { N_JOBS_PER_WORKER: "64", LANGGRAPH_JSON: source.langgraphJson }, [], source.script);
    const client = jsonClient(server.url, size.concurrency);
    try {
      const { job, sequential: waitInTurn } = agentJobs(client);
      await runPool(size.warmup, 16, job); // JIT, graph, SQLite pages
      const sequential = await waitInTurn(size.sequential);
      const cpu0 = await cpuMs(server.pid);
      const ms = await runPool(size.jobs, size.concurrency, job);
      const cpu = (await cpuMs(server.pid)) - cpu0;
      return {
        cpu_ms_per_job: round2(cpu / size.jobs),
        runs_per_s: perSecond(size.jobs, ms),
        sequential_p50_ms: summary(sequential).p50_ms,
        rss_mib: await rssMiB(server.pid),
        start_ms: Math.round(server.startMs),
      };
    } finally {
      await server.stop();
      await client.close();
    }
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
}

export async function benchProjectVsRepo(
  options: BenchOptions = { tiny: false, big: false },
  env: NodeJS.ProcessEnv = process.env,
): Promise<Record<string, unknown>> {
  const size = sizeOf(options, env);
  const project = await makeBenchProject("installed");
  const beside = await makeBenchProject("beside");
  try {
    const sources: Record<Side, GraphSource> = { repo: REPO_GRAPH, project, project_beside: beside };
    const samples: Record<Side, Sample[]> = { repo: [], project: [], project_beside: [] };
    for (let round = 0; round < size.rounds; round++) {
      // The order rotates, so each side goes first, second and third as often.
      const order = SIDES.map((_, i) => SIDES[(i + round) % SIDES.length]!);
      for (const side of order) {
        const sample = await measure(sources[side], size);
        samples[side].push(sample);
        console.error(`project-vs-repo: round ${round + 1}/${size.rounds} ${side}: ${JSON.stringify(sample)}`);
      }
    }
    const medians = (list: Sample[]) => mediansOf(list, METRICS);

    return {
      setup: {
        mode: options.tiny ? "tiny" : "full",
        server: `node ${startScriptNodeFlags().join(" ")} <main.js> (as npm start), the same build for all, SQLite synchronous=FULL, N_JOBS_PER_WORKER=64`,
        repo: REPO_GRAPH.describe,
        project: project.describe,
        project_beside: beside.describe,
        rounds: size.rounds,
        job: "POST /threads + POST /threads/{id}/runs/wait on agent",
        jobs_per_round: size.jobs,
        concurrency: size.concurrency,
        sequential_per_round: size.sequential,
        warmup_jobs: size.warmup,
        order: "repo, project, project_beside, rotated by one each round; each server on an empty data dir",
      },
      repo: medians(samples.repo),
      project: medians(samples.project),
      project_beside: medians(samples.project_beside),
      ratio_project_over_repo: pairedRatios(samples.repo, samples.project, METRICS),
      ratio_project_beside_over_repo: pairedRatios(samples.repo, samples.project_beside, METRICS),
    };
  } finally {
    await Promise.all([project.remove(), beside.remove()]);
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  console.log(JSON.stringify(await benchProjectVsRepo(parseBenchOptions(process.argv.slice(2))), null, 2));
}
