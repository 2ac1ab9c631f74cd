/**
 * Large-state benchmark: what a run costs on a thread that already holds a long conversation, beside
 * the graph itself on the same state. A chat agent's thread grows with every turn, and every part of
 * a durable run that copies the whole state (checkpoint serialisation, the `values` chunks, the run's
 * final values, the response) grows with it.
 *   - the anchor: the example graph `agent` compiled with an in-memory `MemorySaver`, in this
 *     process, on one thread seeded with `messages` messages of `messageBytes` characters each; then
 *     `runs` sequential invokes adding one human message each (the reply adds one more). Measured
 *     before and after the server, mean of the two p50s;
 *   - the server (built `dist/main.js` as `npm start` runs it, SQLite synchronous=FULL): one thread
 *     seeded by a first `runs/wait` with the same messages, then `runs` sequential `runs/wait` on it:
 *     p50/p99 latency, server CPU per run (/proc), and the ratio engine p50 ÷ server p50.
 *   - the same with a small state (a fresh thread per run) for comparison: how much a large state
 *     adds to a run on either side.
 * Run: npm run bench -- large-state [--tiny]. LARGE_STATE_MAIN=<main.js of another build> measures
 * that build's server instead of this checkout's dist/ (same graph and langgraph.json).
 */
import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { compileAgentGraph } from "./support/engine-graph.js";
import { AGENT_INPUT, jsonClient, type JsonClient } from "./support/http.js";
import { parseBenchOptions, type BenchOptions } from "./support/options.js";
import { cpuMs, startBenchServer, waitOk } from "./support/server.js";
import { round2, summary } from "./support/stats.js";

const FULL = { messages: 500, messageBytes: 1_000, runs: 60, warmup: 10 };
const TINY = { messages: 20, messageBytes: 1_000, runs: 5, warmup: 2 };

type Size = typeof FULL;

/** The seed: `messages` human messages of `messageBytes` characters each, with ids (so a re-run replaces rather than appends). */
function seedMessages(size: Size): { role: string; content: string; id: string }[] {
  return Array.from({ length: size.messages }, (_, i) => ({ role: "user", content: `${i} `.padEnd(size.messageBytes, "x"), id: `seed-${i}` }));
}

function lastContent(values: unknown): unknown {
  return (values as { messages?: { content?: unknown }[] }).messages?.at(-1)?.content;
}

async function timed(n: number, run: () => Promise<void>): Promise<number[]> {
  const ms: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await run();
    ms.push(performance.now() - t0);
  }
  return ms;
}

/** The graph invoked in this process: p50 per invoke on the large thread, and on a fresh thread each. */
async function engine(size: Size): Promise<{ large_p50_ms: number; small_p50_ms: number }> {
  const graph = await compileAgentGraph();
  const large = { configurable: { thread_id: randomUUID() } };
  await graph.invoke({ messages: seedMessages(size) }, large);
  const invokeLarge = async () => {
    if (lastContent(await graph.invoke(AGENT_INPUT, large)) !== "You said: hello") throw new Error("engine: unexpected reply");
  };
  const invokeSmall = async () => void (await graph.invoke(AGENT_INPUT, { configurable: { thread_id: randomUUID() } }));
  await timed(size.warmup, invokeLarge);
  await timed(size.warmup, invokeSmall);
  return { large_p50_ms: summary(await timed(size.runs, invokeLarge)).p50_ms, small_p50_ms: summary(await timed(size.runs, invokeSmall)).p50_ms };
}

async function waitOn(client: JsonClient, threadId: string, input: unknown): Promise<unknown> {
  return client.post(`/threads/${threadId}/runs/wait`, { assistant_id: "agent", input });
}

async function server(size: Size, dir: string, script?: string) {
  const s = await startBenchServer(dir, {}, [], script);
  const client = jsonClient(s.url, 2);
  try {
    await waitOk(s.url);
    const newThread = async () => (await client.post<{ thread_id: string }>("/threads", {})).thread_id;
    const threadId = await newThread();
    const seeded = await waitOn(client, threadId, { messages: seedMessages(size) });
    if ((seeded as { messages?: unknown[] }).messages?.length !== size.messages + 1) throw new Error("server: the seed run did not keep every message");
    const waitLarge = async () => {
      if (lastContent(await waitOn(client, threadId, AGENT_INPUT)) !== "You said: hello") throw new Error("server: unexpected reply");
    };
    const waitSmall = async () => {
      if (lastContent(await waitOn(client, await newThread(), AGENT_INPUT)) !== "You said: hello") throw new Error("server: unexpected reply");
    };
    await timed(size.warmup, waitLarge);
    await timed(size.warmup, waitSmall);
    const cpu0 = await cpuMs(s.pid);
    const large = summary(await timed(size.runs, waitLarge));
    const cpuLarge = ((await cpuMs(s.pid)) - cpu0) / size.runs;
    const small = summary(await timed(size.runs, waitSmall));
    return { large, small, cpu_ms_per_large_run: round2(cpuLarge) };
  } finally {
    await client.close();
    await s.stop();
  }
}

export async function benchLargeState(
  options: BenchOptions = { tiny: false, big: false },
  env: NodeJS.ProcessEnv = process.env,
): Promise<Record<string, unknown>> {
  const size = options.tiny ? TINY : FULL;
  const dir = await mkdtemp(path.join(os.tmpdir(), "agent-server-bench-large-state-"));
  try {
    const before = await engine(size);
    const measured = await server(size, path.join(dir, "data"), env.LARGE_STATE_MAIN || undefined);
    const after = await engine(size);
    const engineLarge = round2((before.large_p50_ms + after.large_p50_ms) / 2);
    const engineSmall = round2((before.small_p50_ms + after.small_p50_ms) / 2);
    return {
      setup: {
        mode: options.tiny ? "tiny" : "full",
        state: `${size.messages} messages of ${size.messageBytes} characters on one thread (about ${Math.round((size.messages * size.messageBytes) / 1024)} KiB of text), sequential runs adding one message each`,
        engine: "agent graph compiled with new MemorySaver(), invoked in this process (p50; before and after the server, mean)",
        server: `${env.LARGE_STATE_MAIN || "dist/main.js"} as npm start runs it, SQLite synchronous=FULL; POST /threads/{id}/runs/wait`,
      },
      large_state: {
        engine_p50_ms: engineLarge,
        server: measured.large,
        server_cpu_ms_per_run: measured.cpu_ms_per_large_run,
        ratio_engine_to_server_p50: round2(engineLarge / measured.large.p50_ms),
      },
      small_state: {
        engine_p50_ms: engineSmall,
        server_p50_ms: measured.small.p50_ms,
        ratio_engine_to_server_p50: round2(engineSmall / measured.small.p50_ms),
      },
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  console.log(JSON.stringify(await benchLargeState(parseBenchOptions(process.argv.slice(2))), null, 2));
}
