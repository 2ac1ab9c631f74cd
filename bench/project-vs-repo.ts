/**
 * The graph in the user's project beside the graph in this repository, in one run: the same build
 * (`dist/main.js`) started on this repository's langgraph.json (`repo`: src/graphs/agent.ts on this
 * repository's node_modules) and on a project folder's (`project`: a copy of that graph in a project with
 * its own copies of @langchain/langgraph, @langchain/core and @langchain/langgraph-checkpoint, the rest
 * linked; bench/support/project.ts), as users run theirs. Each round starts both in turn (the order
 * alternates: repo then project in even rounds, project then repo in odd ones), each on an empty data dir:
 * a warm-up, `sequential` runs/wait one after another (p50, each on a thread made outside its timing), then
 * `jobs` jobs (POST /threads + POST /threads/{id}/runs/wait) at `concurrency` 64, with the server's CPU
 * (utime + stime of /proc/<pid>/stat) over the jobs. Prints each side's medians and, per metric, the ratios
 * project/repo of the rounds (median, min, max): this machine's speed drifts, so the paired ratio is the verdict.
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
const SIDES = ["repo", "project"] as const;
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
    const server = await startBenchServer(dataDir, { N_JOBS_PER_WORKER: "64", LANGGRAPH_JSON: source.langgraphJson });
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

export async function benchProjectVsRepo(options: BenchOptions = { tiny: false, big: false }, env: NodeJS.ProcessEnv = process.env): Promise<Record<string, unknown>> {
  const size = sizeOf(options, env);
  const project = await makeBenchProject();
  try {
    const sources: Record<Side, GraphSource> = { repo: REPO_GRAPH, project };
    const samples: Record<Side, Sample[]> = { repo: [], project: [] };
    for (let round = 0; round < size.rounds; round++) {
      for (const side of round % 2 ? ([...SIDES].reverse() as Side[]) : SIDES) {
        const sample = await measure(sources[side], size);
        samples[side].push(sample);
        console.error(`project-vs-repo: round ${round + 1}/${size.rounds} ${side}: ${JSON.stringify(sample)}`);
      }
    }
    const medians = (list: Sample[]) => mediansOf(list, METRICS);
    const ratios = pairedRatios(samples.repo, samples.project, METRICS);
    return {
      setup: {
        mode: options.tiny ? "tiny" : "full",
        server: `node ${startScriptNodeFlags().join(" ")} dist/main.js (as npm start), the same build for both, SQLite synchronous=FULL, N_JOBS_PER_WORKER=64`,
        repo: REPO_GRAPH.describe,
        project: project.describe,
        rounds: size.rounds,
        job: "POST /threads + POST /threads/{id}/runs/wait on agent",
        jobs_per_round: size.jobs,
        concurrency: size.concurrency,
        sequential_per_round: size.sequential,
        warmup_jobs: size.warmup,
        order: "repo then project in even rounds, project then repo in odd ones; each server on an empty data dir",
      },
      repo: medians(samples.repo),
      project: medians(samples.project),
      ratio_project_over_repo: ratios,
    };
  } finally {
    await project.remove();
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  console.log(JSON.stringify(await benchProjectVsRepo(parseBenchOptions(process.argv.slice(2))), null, 2));
}
