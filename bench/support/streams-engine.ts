/**
 * The floor under the streams benchmark's CPU per token: the same graph file, from the same project folder (its own
 * copies of LangGraph and LangChain), streamed in this process with a `MemorySaver`, `n` runs at once, with
 * `streamMode: ["messages", "values"]` (what the server asks LangGraph for a `messages-tuple` + `values` request).
 * No HTTP, no log, no SSE: what the graph and LangChain cost alone per token.
 */
import { writeFile } from "node:fs/promises";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { round2 } from "./stats.js";

export interface EngineWave {
  streams: number;
  token_events: number;
  wall_ms: number;
  cpu_ms: number;
  cpu_per_token_event_us: number;
  cpu_per_run_ms: number;
}

type StreamOnce = (threadId: string) => Promise<number>;

/** Writes the in-process runner next to the project's graph file (`src/chat.ts`) and imports it. */
export async function loadEngine(projectDir: string): Promise<StreamOnce> {
  const file = path.join(projectDir, "src", "chat-engine.ts");
  await writeFile(
    file,
    `// Made by bench/support/streams-engine.ts: the chat graph streamed in-process, as the server streams it.
import { MemorySaver } from "@langchain/langgraph";
import { graph } from "./chat.js";

graph.checkpointer = new MemorySaver();

/** Streams one run on a new thread; resolves with its token events (messages chunks with content). */
export async function streamOnce(threadId: string): Promise<number> {
  let tokens = 0;
  const stream = await graph.stream(
    { messages: [{ role: "user", content: "hello" }] },
    { configurable: { thread_id: threadId }, streamMode: ["messages", "values"] },
  );
  for await (const [mode, chunk] of stream) if (mode === "messages" && (chunk as [{ content?: unknown }])[0]?.content) tokens++;
  return tokens;
}
`,
  );
  return ((await import(pathToFileURL(file).href)) as { streamOnce: StreamOnce }).streamOnce;
}

let threads = 0;

/** `n` runs at once in this process: its CPU (`process.cpuUsage`) over the wave, per token event and per run. */
export async function engineWave(streamOnce: StreamOnce, n: number): Promise<EngineWave> {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const counts = await Promise.all(Array.from({ length: n }, () => streamOnce(`engine-${++threads}`)));
  const wallMs = performance.now() - t0;
  const c = process.cpuUsage(c0);
  const cpuMs = (c.user + c.system) / 1000;
  const tokens = counts.reduce((a, b) => a + b, 0);
  return {
    streams: n,
    token_events: tokens,
    wall_ms: Math.round(wallMs),
    cpu_ms: Math.round(cpuMs),
    cpu_per_token_event_us: tokens ? round2((cpuMs / tokens) * 1000) : NaN,
    cpu_per_run_ms: round2(cpuMs / n),
  };
}
