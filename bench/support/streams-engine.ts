/**
 * The floor under the streams benchmark: the same graph file, from the same project folder (its own copies of
 * LangGraph and LangChain), streamed by a plain node process of its own, started with the server's node flags
 * (`npm start`'s), `n` runs at once, with a `MemorySaver` emptied after each wave and
 * `streamMode: ["messages", "values"]` (what the server asks LangGraph for a `messages-tuple` + `values` request).
 * No HTTP, no log, no SSE, no client on the same cores: what the graph and LangChain cost alone. The process is
 * measured as the servers are (CPU and peak RSS from /proc, each stream's end from the wave's start), so its CPU
 * per token, end p50 and peak RSS are the floors under the servers' in the same run.
 */
import { fork, type ChildProcess } from "node:child_process";
import { writeFile } from "node:fs/promises";
import path from "node:path";
import { build } from "esbuild";
import { startScriptNodeFlags } from "./server.js";
import { round2, summary } from "./stats.js";
import { sampleTreePeakRss, treeCpuMs } from "./streams-proc.js";

export interface EngineWave {
  streams: number;
  token_events: number;
  wall_ms: number;
  /** Each stream's end, from the wave's start (all runs start together). */
  end: { p50_ms: number; p99_ms: number };
  cpu_ms: number;
  cpu_per_token_event_us: number;
  cpu_per_run_ms: number;
  peak_rss_mib: number;
}

export interface Engine {
  wave(n: number): Promise<EngineWave>;
  stop(): Promise<void>;
}

/** What the engine process answers for a wave. */
interface WaveReply {
  tokens: number;
  ends: number[];
  wallMs: number;
}

const RUNNER = `// Made by bench/support/streams-engine.ts: the chat graph streamed by a process of its own, as the server streams it.
import { MemorySaver } from "@langchain/langgraph";
import { graph } from "./chat.js";

const saver = new MemorySaver();
graph.checkpointer = saver;
let threads = 0;

/** Streams one run on a new thread; resolves with its token events (messages chunks with content). */
async function streamOnce(): Promise<number> {
  let tokens = 0;
  const stream = await graph.stream(
    { messages: [{ role: "user", content: "hello" }] },
    { configurable: { thread_id: "engine-" + ++threads }, streamMode: ["messages", "values"] },
  );
  for await (const [mode, chunk] of stream) if (mode === "messages" && (chunk as [{ content?: unknown }])[0]?.content) tokens++;
  return tokens;
}

/** n runs at once; each one's end from the wave's start. The saver forgets them after (the server keeps no such map). */
async function wave(n: number) {
  const t0 = performance.now();
  const ends: number[] = [];
  const counts = await Promise.all(Array.from({ length: n }, () => streamOnce().then((tokens) => (ends.push(performance.now() - t0), tokens))));
  const wallMs = performance.now() - t0;
  saver.storage = {};
  saver.writes = {};
  return { tokens: counts.reduce((a, b) => a + b, 0), ends, wallMs };
}

process.on("message", (message: { wave: number }) => {
  wave(message.wave).then(
    (reply) => process.send!(reply),
    (error) => process.send!({ error: String((error as Error)?.stack ?? error) }),
  );
});
process.on("disconnect", () => process.exit(0));
`;

/**
 * Writes the runner next to the project's graph file (`src/chat.ts`), bundles it (the graph included, LangChain's
 * packages left to the project's node_modules) and starts it with `npm start`'s node flags.
 */
export async function startEngine(projectDir: string): Promise<Engine> {
  const source = path.join(projectDir, "src", "chat-engine.ts");
  const bundle = path.join(projectDir, "src", "chat-engine.mjs");
  await writeFile(source, RUNNER);
  await build({
    entryPoints: [source],
    outfile: bundle,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    external: ["@langchain/*"],
    logLevel: "warning",
  });
  const child = fork(bundle, [], { cwd: projectDir, execArgv: startScriptNodeFlags(), stdio: ["ignore", "ignore", "inherit", "ipc"] });
  await new Promise<void>((resolve, reject) => {
    child.once("spawn", resolve);
    child.once("error", reject);
  });
  return {
    wave: (n) => measuredWave(child, n),
    stop: () => stopChild(child),
  };
}

async function measuredWave(child: ChildProcess, n: number): Promise<EngineWave> {
  const pid = child.pid!;
  const rss = sampleTreePeakRss(pid);
  const c0 = await treeCpuMs(pid);
  const reply = await ask(child, n);
  const cpuMs = (await treeCpuMs(pid)) - c0;
  const peak = await rss.stop();
  const ends = summary(reply.ends);
  return {
    streams: n,
    token_events: reply.tokens,
    wall_ms: Math.round(reply.wallMs),
    end: { p50_ms: ends.p50_ms, p99_ms: ends.p99_ms },
    cpu_ms: Math.round(cpuMs),
    cpu_per_token_event_us: reply.tokens ? round2((cpuMs / reply.tokens) * 1000) : NaN,
    cpu_per_run_ms: round2(cpuMs / n),
    peak_rss_mib: peak,
  };
}

function ask(child: ChildProcess, n: number): Promise<WaveReply> {
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null) => reject(new Error(`the engine process exited (code ${code}) during a wave of ${n}`));
    child.once("exit", onExit);
    child.once("message", (reply: WaveReply | { error: string }) => {
      child.off("exit", onExit);
      if ("error" in reply) reject(new Error(`the engine's wave of ${n} failed: ${reply.error}`));
      else resolve(reply);
    });
    child.send({ wave: n });
  });
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.disconnect();
  const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
  await exited;
  clearTimeout(timer);
}
