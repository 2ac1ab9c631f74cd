/**
 * Start benchmark: how long `npm start` (`node dist/main.js`) takes to answer `/ok` 200, and where
 * that time goes.
 *   - `empty`: a new, empty DATA_DIR each start (the first start of a fresh install);
 *   - `restart`: the same DATA_DIR again (the read models exist, caches are warm);
 *   - `node_floor`: `node -e 0` spawned and exited, the part no server code can cut;
 *   - `phases_ms`: the server's own start-up phases (`agent_server_startup_phase_seconds` on
 *     /metrics, median over the starts): `modules` is from the process start to the server's first
 *     line (loading the bundle and its packages), then configuration and graphs, the event store,
 *     read-model catch-up, default assistants, HTTP routes, listening, schedulers, and after the
 *     server listens, the graph runtime (LangGraph and the graph files) and the run worker;
 *   - `to_first_run_ms`: spawn to the answer of a first `POST /runs/wait` sent right after `/ok`
 *     (what a client waits for its first run: the graph runtime loads after the server listens).
 * Spawn to `/ok` is timed from this process (spawn, then /ok polled every 5 ms). The target (issue
 * 23) is 500 ms on an empty data dir; the scale benchmark measures it at 100,000 threads.
 *   - `instructions`: what a start costs in instructions (valgrind's callgrind, every thread, V8 in predictable
 *     mode), from the spawn on an empty data dir to the listening line, beside `node -e 0`'s: counts that repeat
 *     within 0.5 % whatever the machine's speed, so a change of a few percent can be judged (`unavailable`, with the reason, without valgrind).
 * Run: npm run bench -- start [--tiny]
 */
import { spawnSync } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { request } from "undici";
import { parseBenchOptions, type BenchOptions } from "./support/options.js";
import { buildServer, repoRoot, startBenchServer, waitOk } from "./support/server.js";
import { instructionsUnavailable, nodeFloorInstructions, startInstructions } from "./support/instructions.js";
import { round2, summary } from "./support/stats.js";

const median = (values: number[]) => summary(values).p50_ms;

interface OneStart {
  to_listening_ms: number;
  to_ok_ms: number;
  to_first_run_ms: number;
  phases: Record<string, number>;
}

/** Starts the built server as `npm start` does, times it to its listening line and to `/ok` 200, reads its phases, stops it. */
async function startOnce(dataDir: string, env: Record<string, string> = {}): Promise<OneStart> {
  const server = await startBenchServer(dataDir, env);
  try {
    const toOk = server.startMs + (await waitOk(server.url));
    const t0 = performance.now();
    const run = await request(`${server.url}/runs/wait`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ assistant_id: "agent", input: { messages: [{ role: "user", content: "hello" }] } }),
    });
    const answer = await run.body.text();
    if (run.statusCode !== 200 || !answer.includes("You said: hello")) throw new Error(`first run: HTTP ${run.statusCode} ${answer.slice(0, 300)}`);
    const toFirstRun = toOk + (performance.now() - t0);
    const metrics = await (await request(`${server.url}/metrics`)).body.text();
    const phases: Record<string, number> = {};
    for (const m of metrics.matchAll(/^agent_server_startup_phase_seconds\{phase="([^"]+)"\} ([\d.e+-]+)$/gm)) phases[m[1]] = Number(m[2]) * 1000;
    return { to_listening_ms: server.startMs, to_ok_ms: toOk, to_first_run_ms: toFirstRun, phases };
  } finally {
    await server.stop();
  }
}

/**
 * NODE_EXTRA_CA_CERTS (this sandbox sets it to Debian's CA bundle) makes every node process read and parse those
 * certificates before any JavaScript runs: a cost of the environment, not of the server, measured beside it.
 */
const EXTRA_CA_CERTS = process.env.NODE_EXTRA_CA_CERTS ? { NODE_EXTRA_CA_CERTS: "" } : undefined;

function nodeFloorMs(n: number, env: NodeJS.ProcessEnv = process.env): number {
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    spawnSync(process.execPath, ["-e", "0"], { env });
    times.push(performance.now() - t0);
  }
  return median(times);
}

/** Start-up in instructions (see instructions.ts): a few counts of a start, and the node floor once. */
async function instructions(counts: number): Promise<Record<string, unknown>> {
  const unavailable = instructionsUnavailable();
  if (unavailable) return { unavailable };
  const starts: number[] = [];
  for (let i = 0; i < counts; i++) {
    process.stderr.write(`[start] instructions ${i + 1}/${counts}\n`);
    starts.push(await startInstructions(path.join(repoRoot, "dist", "main.js")));
  }
  const floor = await nodeFloorInstructions();
  const toListening = median(starts);
  return {
    to_listening: toListening,
    to_listening_spread: round2((Math.max(...starts) - Math.min(...starts)) / toListening),
    node_floor: floor,
    above_floor: toListening - floor,
    counts,
  };
}

export async function benchStart(options: BenchOptions): Promise<Record<string, unknown>> {
  buildServer();
  const starts = options.tiny ? 2 : 7;
  const empty: OneStart[] = [];
  const restart: OneStart[] = [];
  const emptyWithoutExtraCa: OneStart[] = [];
  const root = await mkdtemp(path.join(os.tmpdir(), "bench-start-"));
  try {
    for (let i = 0; i < starts; i++) {
      const dir = path.join(root, `d${i}`);
      process.stderr.write(`[start] ${i + 1}/${starts}\n`);
      empty.push(await startOnce(dir));
      restart.push(await startOnce(dir));
      if (EXTRA_CA_CERTS) emptyWithoutExtraCa.push(await startOnce(path.join(root, `n${i}`), EXTRA_CA_CERTS));
    }
  } finally {
    await rm(root, { recursive: true, force: true });
  }
  const phaseNames = Object.keys(empty[0].phases);
  const summarize = (list: OneStart[]) => ({
    to_ok_ms_p50: median(list.map((s) => s.to_ok_ms)),
    to_ok_ms_min: round2(Math.min(...list.map((s) => s.to_ok_ms))),
    to_listening_ms_p50: median(list.map((s) => s.to_listening_ms)),
    to_first_run_ms_p50: median(list.map((s) => s.to_first_run_ms)),
    phases_ms: Object.fromEntries(phaseNames.map((p) => [p, median(list.map((s) => s.phases[p] ?? 0))])),
  });
  const emptySummary = summarize(empty);
  return {
    starts,
    empty: emptySummary,
    restart: summarize(restart),
    node_floor_ms: nodeFloorMs(starts),
    // Only where NODE_EXTRA_CA_CERTS is set: the same empty starts and floor with it emptied.
    ...(EXTRA_CA_CERTS
      ? {
          extra_ca_certs: {
            note: "NODE_EXTRA_CA_CERTS is set: every node process parses those certificates before any JavaScript runs",
            empty_without: summarize(emptyWithoutExtraCa),
            node_floor_ms_without: nodeFloorMs(starts, { ...process.env, ...EXTRA_CA_CERTS }),
          },
        }
      : {}),
    instructions: await instructions(options.tiny ? 1 : 3),
    target: { empty_to_ok_ms: 500, pass: emptySummary.to_ok_ms_p50 <= 500 },
  };
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  console.log(JSON.stringify(await benchStart(parseBenchOptions(process.argv.slice(2))), null, 2));
}
