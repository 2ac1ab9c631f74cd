/**
 * Streams benchmark: many chats at once. A token-streaming graph (bench/support/streams-graph.ts: one node calling
 * `FakeListChatModel`, a 50-token answer, 40 ms apart: 2 s of model time) in a project folder with its own
 * node_modules (bench/support/project.ts, the server installed there as users install it), served with
 * N_JOBS_PER_WORKER=512. In waves of 20, 200 and 500 concurrent clients, each client creates a thread and
 * streams one run to the end (`POST /threads`, then `POST /threads/{id}/runs/stream` with
 * `stream_mode: ["messages-tuple", "values"]`, the SSE read with undici, one connection per client;
 * bench/support/streams-client.ts). Per wave:
 *   - first event (`metadata`), first token (first `messages` event with content) and end, from sending the
 *     stream request: p50 and p99; and from the client's start (`POST /threads` included, so also the time its
 *     connections waited to be accepted);
 *   - server CPU (utime + stime of the process tree, /proc) over the wave, per token event and per run;
 *   - peak RSS of the process tree during the wave (sampled every 100 ms);
 *   - token events per second delivered (all clients' token events ÷ the wave's wall time).
 * `--anchor` (or STREAMS_ANCHOR=1) also starts the official JS dev server (`@langchain/langgraph-cli@1.5.1 dev`,
 * bench/support/streams-anchor.ts) on the same graph source and runs every wave on it too, right after ours, so
 * both are stated side by side from one run; if it cannot be installed or started the reason is printed and the
 * benchmark goes on with ours only. Each server first gets a warm-up wave (not counted), then its CPU while idle is
 * read over 3 s (`idle_cpu_ms_per_s`, the floor under a wave's CPU).
 * `ours_v2`: every wave again on our server, after all the others, with clients of the thread streaming protocol (v2),
 * as useStream opens it (bench/support/streams-client.ts, streamOneRunV2), and `v2_over_v1`: the two side by side
 * (STREAMS_V2=0 skips it).
 * `engine`: the floor, the same graph streamed by a plain node process of its own with the server's node flags, no HTTP,
 * no log and no client (bench/support/streams-engine.ts), each wave size before the servers' waves and after them: its
 * CPU per token, each stream's end (p50/p99 from the wave's start) and peak RSS, measured as the servers' are; and
 * `over_engine`, each of our sides' CPU per token, end p50 and peak RSS ÷ the engine's.
 * STREAMS_NODE_ARGS: node flags for our server, space-separated (e.g. `--cpu-prof --cpu-prof-dir=/tmp/p`).
 * STREAMS_COUNTS=1 (and --tiny): our server is preloaded with bench/support/cost-probe.cjs, and each of its waves also states
 * `counts`: promises and KB allocated on the V8 heap per token event, and the GCs of the wave. Counts do not drift
 * with the machine's speed, so two builds compare in them where CPU per token is lost in the noise; the probe's
 * hook costs CPU, so CPU and times of such a run are not comparable with a run without it.
 * Sizes: STREAMS_WAVES="20,200" (default 20,200,500), STREAMS_TOKENS (50), STREAMS_SLEEP_MS (40).
 * --tiny: one wave of 5 streams, a 10-token answer 5 ms apart, ours only (unless --anchor is given too).
 * Run: npm run bench -- streams [--anchor] [--tiny]
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Pool } from "undici";
import type { BenchOptions } from "./support/options.js";
import { positiveIntEnv } from "./support/options.js";
import { makeBenchProject, type BenchProject } from "./support/project.js";
import { startBenchServer } from "./support/server.js";
import { COST_PROBE_ENV, costProbeNodeArgs, costWindows, type OpenCountWindow } from "./support/cost-window.js";
import { round2, summary } from "./support/stats.js";
import { anchorDir, startAnchor } from "./support/streams-anchor.js";
import { streamOneRun, streamOneRunV2, type StreamTiming } from "./support/streams-client.js";
import { STREAMS_GRAPH_ID, streamsAnswer, streamsGraphSource, streamsLanggraphJson } from "./support/streams-graph.js";
import { startEngine, type Engine, type EngineWave } from "./support/streams-engine.js";
import { sampleTreePeakRss, treeCpuMs } from "./support/streams-proc.js";

const MAX_JOBS = 512;

interface Target {
  /** `ours_v2`: our server again, its clients on the thread streaming protocol (v2) instead of runs/stream. */
  name: "ours" | "ours_v2" | "anchor";
  client?: "v2";
  pid: number;
  url: string;
  describe: string;
  stop(): Promise<void>;
  /** With STREAMS_COUNTS=1 (ours only): opens the probe's window, and resolves with a function that closes it. */
  countWindow?: OpenCountWindow;
}

interface Percentiles {
  p50_ms: number;
  p99_ms: number;
}

export interface WaveResult {
  streams: number;
  ok: number;
  errors: number;
  first_error?: string;
  first_event: Percentiles;
  first_token: Percentiles;
  end: Percentiles;
  thread_create: Percentiles;
  /** The same three from the client's start (its POST /threads), what the user of a new chat waits. */
  from_client_start: { first_event: Percentiles; first_token: Percentiles; end: Percentiles };
  /** The most streams open at one time (sent, not yet ended): how concurrent the wave really was. */
  peak_open_streams: number;
  token_events: number;
  tokens_per_s: number;
  wall_ms: number;
  server_cpu_ms: number;
  server_cpu_per_token_event_us: number;
  server_cpu_per_run_ms: number;
  peak_rss_mib: number;
  /** STREAMS_COUNTS=1: the server's counts over the wave, per token event. */
  counts?: { promises_per_token: number; heap_kb_per_token: number; minor_gcs: number; major_gcs: number };
}

function percentiles(values: number[]): Percentiles {
  if (!values.length) return { p50_ms: NaN, p99_ms: NaN };
  const s = summary(values);
  return { p50_ms: s.p50_ms, p99_ms: s.p99_ms };
}

/** The most streams open at once: intervals from sending the stream request to its end. */
export function peakOpen(streams: readonly Pick<StreamTiming, "stream_sent_at" | "end_ms">[]): number {
  const edges = streams.flatMap((s) => [
    [s.stream_sent_at, 1],
    [s.stream_sent_at + s.end_ms, -1],
  ]);
  edges.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let open = 0;
  let peak = 0;
  for (const [, d] of edges) peak = Math.max(peak, (open += d));
  return peak;
}

/** `n` clients at once on `target`, each on its own connection (a v2 client on two: its subscription holds one). */
async function wave(target: Target, n: number, answer: string): Promise<WaveResult> {
  const v2 = target.client === "v2";
  const pool = new Pool(target.url, { connections: v2 ? 2 * n : n, pipelining: 1, keepAliveTimeout: 30_000, headersTimeout: 600_000, bodyTimeout: 600_000 });
  const client = v2 ? streamOneRunV2 : streamOneRun;
  try {
    const closeCounts = await target.countWindow?.();
    const rss = sampleTreePeakRss(target.pid);
    const cpu0 = await treeCpuMs(target.pid);
    const t0 = performance.now();
    const settled = await Promise.allSettled(Array.from({ length: n }, () => client(pool, STREAMS_GRAPH_ID, answer)));
    const wallMs = performance.now() - t0;
    const cpu = (await treeCpuMs(target.pid)) - cpu0;
    const peak = await rss.stop();
    const counts = await closeCounts?.();
    const ok = settled.filter((s): s is PromiseFulfilledResult<StreamTiming> => s.status === "fulfilled").map((s) => s.value);
    const failed = settled.filter((s): s is PromiseRejectedResult => s.status === "rejected");
    const tokens = ok.reduce((a, t) => a + t.tokens, 0);
    return {
      streams: n,
      ok: ok.length,
      errors: failed.length,
      ...(failed.length ? { first_error: String((failed[0].reason as Error)?.message ?? failed[0].reason).slice(0, 500) } : {}),
      first_event: percentiles(ok.map((t) => t.first_event_ms)),
      first_token: percentiles(ok.map((t) => t.first_token_ms)),
      end: percentiles(ok.map((t) => t.end_ms)),
      thread_create: percentiles(ok.map((t) => t.thread_ms)),
      ...(v2 ? { run_start: percentiles(ok.map((t) => t.run_start_ms ?? NaN)) } : {}),
      from_client_start: {
        first_event: percentiles(ok.map((t) => t.thread_ms + t.first_event_ms)),
        first_token: percentiles(ok.map((t) => t.thread_ms + t.first_token_ms)),
        end: percentiles(ok.map((t) => t.thread_ms + t.end_ms)),
      },
      peak_open_streams: peakOpen(ok),
      token_events: tokens,
      tokens_per_s: Math.round((tokens / wallMs) * 1000),
      wall_ms: Math.round(wallMs),
      server_cpu_ms: Math.round(cpu),
      server_cpu_per_token_event_us: tokens ? round2((cpu / tokens) * 1000) : NaN,
      server_cpu_per_run_ms: ok.length ? round2(cpu / ok.length) : NaN,
      peak_rss_mib: peak,
      ...(counts && tokens
        ? {
            counts: {
              promises_per_token: round2(counts.promises / tokens),
              heap_kb_per_token: round2(counts.allocated_bytes / 1024 / tokens),
              minor_gcs: counts.minor_gcs,
              major_gcs: counts.major_gcs,
            },
          }
        : {}),
    };
  } finally {
    await pool.close();
  }
}

/** The numbers of a wave the comparisons state, by the name they are stated under. */
const WAVE_METRICS = {
  first_event_p50_ms: (w: WaveResult) => w.first_event.p50_ms,
  first_event_p99_ms: (w: WaveResult) => w.first_event.p99_ms,
  first_event_from_client_start_p99_ms: (w: WaveResult) => w.from_client_start.first_event.p99_ms,
  first_token_p50_ms: (w: WaveResult) => w.first_token.p50_ms,
  end_p50_ms: (w: WaveResult) => w.end.p50_ms,
  end_p99_ms: (w: WaveResult) => w.end.p99_ms,
  cpu_per_token_event_us: (w: WaveResult) => w.server_cpu_per_token_event_us,
  cpu_per_run_ms: (w: WaveResult) => w.server_cpu_per_run_ms,
  thread_create_p50_ms: (w: WaveResult) => w.thread_create.p50_ms,
  peak_open_streams: (w: WaveResult) => w.peak_open_streams,
  peak_rss_mib: (w: WaveResult) => w.peak_rss_mib,
  tokens_per_s: (w: WaveResult) => w.tokens_per_s,
};
type WaveMetric = keyof typeof WAVE_METRICS;
const ANCHOR_METRICS: WaveMetric[] = [
  "first_event_p50_ms",
  "first_token_p50_ms",
  "end_p50_ms",
  "end_p99_ms",
  "cpu_per_token_event_us",
  "cpu_per_run_ms",
  "thread_create_p50_ms",
  "peak_open_streams",
  "peak_rss_mib",
  "tokens_per_s",
];
const V2_METRICS: WaveMetric[] = [
  "first_event_p50_ms",
  "first_event_p99_ms",
  "first_event_from_client_start_p99_ms",
  "first_token_p50_ms",
  "end_p50_ms",
  "cpu_per_token_event_us",
  "cpu_per_run_ms",
  "peak_rss_mib",
];

/** Two sides' waves of the same sizes, wave by wave: each metric as `pair` states the first side's value and the second's. */
function sideBySideOf(waves: number[], first: WaveResult[], second: WaveResult[], pair: (a: number, b: number) => object, metrics: WaveMetric[]) {
  return waves.map((streams, i) => ({ streams, ...Object.fromEntries(metrics.map((m) => [m, pair(WAVE_METRICS[m](first[i]), WAVE_METRICS[m](second[i]))])) }));
}

/** Our server on the project folder, its langgraph.json naming the streams graph only. */
async function startOurs(project: BenchProject, dataDir: string, tokens: number, sleepMs: number, nodeArgs: string[], counts: boolean): Promise<Target> {
  await writeFile(path.join(project.dir, "src", "chat.ts"), streamsGraphSource(tokens, sleepMs));
  await writeFile(project.langgraphJson, streamsLanggraphJson("./src/chat.ts"));
  const env = { N_JOBS_PER_WORKER: String(MAX_JOBS), LANGGRAPH_JSON: project.langgraphJson, ...(counts ? COST_PROBE_ENV : {}) };
  const server = await startBenchServer(dataDir, env, counts ? [...nodeArgs, ...costProbeNodeArgs()] : nodeArgs, project.script);
  return {
    name: "ours",
    pid: server.pid,
    url: server.url,
    describe: `this server (package installed in a project folder with its own node_modules, SQLite), N_JOBS_PER_WORKER=${MAX_JOBS}${counts ? ", preloaded with bench/support/cost-probe.cjs" : ""}`,
    stop: () => server.stop(),
    ...(counts ? { countWindow: costWindows(server) } : {}),
  };
}

interface EngineFloor {
  streams: number;
  cpu_per_token_event_us: number;
  end_p50_ms: number;
  peak_rss_mib: number;
  before: EngineWave;
  after: EngineWave;
}

/** The engine's wave before and after the servers', and the means of the two: the floor to compare with. */
function engineOf(before: EngineWave, after: EngineWave): EngineFloor {
  const mean = (a: number, b: number) => round2((a + b) / 2);
  return {
    streams: before.streams,
    cpu_per_token_event_us: mean(before.cpu_per_token_event_us, after.cpu_per_token_event_us),
    end_p50_ms: mean(before.end.p50_ms, after.end.p50_ms),
    peak_rss_mib: mean(before.peak_rss_mib, after.peak_rss_mib),
    before,
    after,
  };
}

/** A side's wave ÷ the engine's floor, per wave size: CPU per token, end p50 and peak RSS. */
function overEngineOf(
  waves: readonly WaveResult[],
  engine: readonly EngineFloor[],
): { streams: number; cpu_per_token: number; end_p50: number; peak_rss: number }[] {
  return waves.map((w, i) => ({
    streams: w.streams,
    cpu_per_token: round2(w.server_cpu_per_token_event_us / engine[i].cpu_per_token_event_us),
    end_p50: round2(w.end.p50_ms / engine[i].end_p50_ms),
    peak_rss: round2(w.peak_rss_mib / engine[i].peak_rss_mib),
  }));
}

/** "20,200,500" → [20, 200, 500]; anything but positive integers is an error naming STREAMS_WAVES. */
export function parseWaves(text: string): number[] {
  const waves = text.split(",").map((w) => Number(w.trim()));
  if (!waves.length || waves.some((n) => !Number.isInteger(n) || n < 1)) throw new Error(`STREAMS_WAVES must list positive integers, got "${text}"`);
  return waves;
}

function fmt(p: Percentiles): string {
  return `${Math.round(p.p50_ms)}/${Math.round(p.p99_ms)}`;
}

/** One line per side and wave on stderr, for reading as it runs. */
function printWave(name: string, w: WaveResult): void {
  console.error(
    `streams: ${name.padEnd(6)} ${String(w.streams).padStart(4)} streams: first event ${fmt(w.first_event)} ms, first token ${fmt(w.first_token)} ms, ` +
      `end ${fmt(w.end)} ms (p50/p99; thread ${fmt(w.thread_create)} ms before; first event ${fmt(w.from_client_start.first_event)} ms from the client's start; ${w.peak_open_streams} open at most); CPU ${w.server_cpu_per_token_event_us} µs/token, ${w.server_cpu_per_run_ms} ms/run; ` +
      `peak RSS ${w.peak_rss_mib} MiB; ${w.tokens_per_s} tokens/s` +
      (w.counts ? `; ${w.counts.promises_per_token} promises and ${w.counts.heap_kb_per_token} KB of heap per token` : "") +
      (w.errors ? `; ${w.errors} errors: ${w.first_error}` : ""),
  );
}

export async function benchStreams(
  options: BenchOptions,
  argv: readonly string[] = process.argv,
  env: NodeJS.ProcessEnv = process.env,
): Promise<Record<string, unknown>> {
  const tiny = options.tiny;
  const waves = tiny ? [5] : parseWaves(env.STREAMS_WAVES ?? "20,200,500");
  const tokens = tiny ? 10 : positiveIntEnv(env, "STREAMS_TOKENS", 50);
  const sleepMs = tiny ? 5 : positiveIntEnv(env, "STREAMS_SLEEP_MS", 40);
  const warmup = tiny ? 2 : 20;
  const wantAnchor = argv.includes("--anchor") || (!!env.STREAMS_ANCHOR && env.STREAMS_ANCHOR !== "0");
  const wantV2 = env.STREAMS_V2 !== "0";
  const answer = streamsAnswer(tokens);

  const project = await makeBenchProject();
  const dataDir = await mkdtemp(path.join(tmpdir(), "agent-server-bench-streams-"));
  const targets: Target[] = [];
  let engineProcess: Engine | undefined;
  let anchorNote: string | undefined;
  try {
    // Tiny runs count too, so that the probe's path is exercised wherever the benchmarks run.
    const counts = tiny || (!!env.STREAMS_COUNTS && env.STREAMS_COUNTS !== "0");
    const ours = await startOurs(project, dataDir, tokens, sleepMs, (env.STREAMS_NODE_ARGS ?? "").split(" ").filter(Boolean), counts);
    targets.push(ours);
    // The same server again with v2 clients (stopped once, as `ours`).
    if (wantV2)
      targets.push({
        ...ours,
        name: "ours_v2",
        client: "v2",
        describe: `${ours.describe}; clients on the thread streaming protocol (v2)`,
        stop: async () => {},
      });
    if (wantAnchor) {
      try {
        targets.push({ name: "anchor", ...(await startAnchor(await anchorDir(env), tokens, sleepMs, MAX_JOBS)) });
      } catch (error) {
        anchorNote = `anchor skipped: ${(error as Error).message}`;
        console.error(`streams: ${anchorNote}`);
      }
    }
    for (const t of targets) {
      const w = await wave(t, warmup, answer);
      if (w.errors) throw new Error(`${t.name}: warm-up wave failed: ${w.first_error}`);
    }
    // What each server's tree burns with no request (timers, persistence): the floor under a wave's CPU.
    const idle: Record<string, number> = {};
    for (const t of targets) {
      await new Promise((r) => setTimeout(r, tiny ? 100 : 1_000));
      const c0 = await treeCpuMs(t.pid);
      const i0 = performance.now();
      await new Promise((r) => setTimeout(r, tiny ? 500 : 3_000));
      idle[t.name] = round2(((await treeCpuMs(t.pid)) - c0) / ((performance.now() - i0) / 1000));
    }
    // The floor: the graph alone in a process of its own, wave by wave, before the servers' waves and again after
    // them (the machine's speed drifts within a run), while the servers idle.
    const engineProc = await startEngine(project.dir);
    engineProcess = engineProc;
    await engineProc.wave(warmup);
    const engineBefore: EngineWave[] = [];
    for (const n of waves) engineBefore.push(await engineProc.wave(n));
    const results: Record<string, WaveResult[]> = Object.fromEntries(targets.map((t) => [t.name, []]));
    // Ours and the anchor wave by wave, side by side; the v2 waves after all of them, so that what they leave in the
    // server's heap does not weigh on the v1 waves' memory (their numbers stay comparable with earlier runs).
    const v1Targets = targets.filter((t) => t.client !== "v2");
    const v2Targets = targets.filter((t) => t.client === "v2");
    for (const [n, t] of [...waves.flatMap((n) => v1Targets.map((t) => [n, t] as const)), ...v2Targets.flatMap((t) => waves.map((n) => [n, t] as const))]) {
      await new Promise((r) => setTimeout(r, tiny ? 100 : 1_000)); // the previous wave's stragglers settle
      const w = await wave(t, n, answer);
      printWave(t.name, w);
      if (tiny && w.errors) throw new Error(`${t.name}: ${w.errors} of ${n} streams failed: ${w.first_error}`);
      results[t.name].push(w);
    }
    const engineAfter: EngineWave[] = [];
    for (const n of waves) engineAfter.push(await engineProc.wave(n));
    const engine = engineBefore.map((before, i) => engineOf(before, engineAfter[i]));
    for (const e of engine)
      console.error(
        `streams: engine ${String(e.streams).padStart(4)} streams, the graph alone in its own process: CPU ${e.cpu_per_token_event_us} µs/token, ` +
          `end p50 ${e.end_p50_ms} ms, peak RSS ${e.peak_rss_mib} MiB (before the servers' waves ${e.before.cpu_per_token_event_us}, ${e.before.end.p50_ms}, ${e.before.peak_rss_mib}; ` +
          `after ${e.after.cpu_per_token_event_us}, ${e.after.end.p50_ms}, ${e.after.peak_rss_mib})`,
      );
    const overEngine = Object.fromEntries(
      Object.entries(results)
        .filter(([name]) => name !== "anchor")
        .map(([name, ws]) => [name, overEngineOf(ws, engine)]),
    );
    const sideBySide = results.anchor?.length
      ? sideBySideOf(waves, results.ours, results.anchor, (ours, anchor) => ({ ours, anchor, ours_over_anchor: round2(ours / anchor) }), ANCHOR_METRICS)
      : undefined;
    const v2OverV1 = results.ours_v2?.length
      ? sideBySideOf(waves, results.ours, results.ours_v2, (v1, v2) => ({ v1, v2, v2_over_v1: round2(v2 / v1) }), V2_METRICS)
      : undefined;
    return {
      setup: {
        mode: tiny ? "tiny" : "full",
        graph: `${STREAMS_GRAPH_ID}: one node, FakeListChatModel answering ${tokens} tokens ${sleepMs} ms apart (${tokens * sleepMs} ms of model time)`,
        request: 'POST /threads, then POST /threads/{id}/runs/stream, stream_mode ["messages-tuple", "values"], read to the end',
        ...(wantV2
          ? {
              request_v2:
                "ours_v2: POST /threads, POST /threads/{id}/stream/events (channels messages, values, lifecycle), then the run.start command (POST /threads/{id}/commands), read until the root lifecycle ends; times from sending the command",
            }
          : {}),
        waves,
        warmup_streams: warmup,
        client: "undici, one connection per stream, 127.0.0.1; times from sending the stream request",
        cpu_rss: "utime + stime and VmRSS summed over the server's process tree (/proc); RSS peak sampled every 100 ms",
        servers: Object.fromEntries(targets.map((t) => [t.name, t.describe])),
        ...(anchorNote ? { anchor: anchorNote } : {}),
      },
      idle_cpu_ms_per_s: idle,
      waves: results,
      engine,
      over_engine: overEngine,
      ...(sideBySide ? { side_by_side: sideBySide } : {}),
      ...(v2OverV1 ? { v2_over_v1: v2OverV1 } : {}),
    };
  } finally {
    await engineProcess?.stop().catch(() => undefined);
    for (const t of targets) await t.stop().catch(() => undefined);
    await rm(dataDir, { recursive: true, force: true });
    await project.remove();
  }
}
