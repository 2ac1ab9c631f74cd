/**
 * Clients that stop reading a run's SSE stream cost the server a bounded amount each: 100 raw sockets
 * join the stream of a run that emits many large chunks and never read; what the subscriptions and the
 * SSE responses hold stays under the bound, and a client that finally reads gets the whole stream.
 * Synchronisation by awaited events only (the gauge's changes, the run's end through the API).
 */
import { mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import t from "tap";
import { SUBSCRIPTION_BUFFER, subscriptionBuffers } from "../../src/eventstore/subscription-buffers.js";
import { SseWriter } from "../../src/util/sse-writer.js";
import { addressOf, parseAnswer } from "../support/raw-http.js";
import { repoRoot, startTestServer } from "../support/server.js";

const CLIENTS = 100;
const CHUNKS = 300;
const CHUNK_BYTES = 32 * 1024;

/** `chunky`: waits until the file `gate` exists, then writes `n` custom chunks of `size` characters. */
const GRAPH = `
import { existsSync, watch } from "node:fs";
import path from "node:path";
import { END, START, StateGraph, StateSchema } from "@langchain/langgraph";
import { z } from "zod";

const State = new StateSchema({ n: z.number(), size: z.number(), gate: z.string() });

function opened(file: string): Promise<void> {
  return new Promise((resolve) => {
    const watcher = watch(path.dirname(file), () => {
      if (existsSync(file)) {
        watcher.close();
        resolve();
      }
    });
    if (existsSync(file)) {
      watcher.close();
      resolve();
    }
  });
}

export const graph = new StateGraph(State)
  .addNode("emit", async (state, config) => {
    await opened(state.gate);
    const pad = "x".repeat(state.size);
    for (let i = 0; i < state.n; i++) {
      config.writer?.({ i, pad });
      // One chunk a turn: the run's outputs go out in appends of a few chunks, as a model's tokens do.
      await new Promise((resolve) => setImmediate(resolve));
    }
    return {};
  })
  .addEdge(START, "emit")
  .addEdge("emit", END)
  .compile();
`;

async function project(): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "slow-readers-"));
  await symlink(path.join(repoRoot, "node_modules"), path.join(dir, "node_modules"));
  await writeFile(path.join(dir, "package.json"), JSON.stringify({ name: "slow-readers", private: true, type: "module" }));
  await writeFile(path.join(dir, "chunky.ts"), GRAPH);
  await writeFile(path.join(dir, "langgraph.json"), JSON.stringify({ graphs: { chunky: "./chunky.ts:graph" } }));
  return dir;
}

t.test("a hundred clients that never read cost at most the bound each; one that reads late gets everything", async (t) => {
  const dir = await project();
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const server = await startTestServer({ env: { LANGGRAPH_JSON: path.join(dir, "langgraph.json") } });
  t.teardown(() => server.close());
  const { client } = server;

  const thread = await client.threads.create();
  const gate = path.join(dir, "gate");
  const run = await client.runs.create(thread.thread_id, "chunky", { input: { n: CHUNKS, size: CHUNK_BYTES, gate }, streamMode: ["custom"] });

  subscriptionBuffers.resetPeaks();
  const { host, port } = addressOf(server.url);
  const request = `GET /threads/${thread.thread_id}/runs/${run.run_id}/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n`;
  const openBefore = SseWriter.openCount;
  const sockets = await Promise.all(
    Array.from(
      { length: CLIENTS },
      () =>
        new Promise<net.Socket>((resolve, reject) => {
          const socket = net.connect(port, host, () => {
            // Never reads: the kernel's buffers fill, then the server's.
            socket.pause();
            socket.write(request);
            resolve(socket);
          });
          socket.once("error", reject);
        }),
    ),
  );
  t.teardown(() => {
    for (const socket of sockets) socket.destroy();
  });
  // Every stream is open and following the run (each one's subscription has read from the log) before it emits.
  await subscriptionBuffers.until(() => SseWriter.openCount >= openBefore + CLIENTS);
  await writeFile(gate, "");
  await client.runs.join(thread.thread_id, run.run_id);

  const perStream = SUBSCRIPTION_BUFFER.maxBytes;
  // The read models' subscription and the run worker's follow the log too.
  const others = 8;
  t.ok(
    subscriptionBuffers.peakBytes <= (CLIENTS + others) * perStream,
    `the subscriptions held at most ${(CLIENTS + others) * perStream} bytes at any time (peak ${subscriptionBuffers.peakBytes}); the run wrote ${CHUNKS * CHUNK_BYTES} per stream`,
  );
  // Each response: at most the socket's high-water mark and one event (a chunk, with its SSE framing).
  const perResponse = 16 * 1024 + CHUNK_BYTES + 1024;
  const pending = SseWriter.pendingBytes();
  t.ok(pending <= CLIENTS * perResponse, `the SSE responses hold ${pending} bytes, at most ${CLIENTS * perResponse}`);
  t.ok(pending > 0, "the clients left bytes unread: their streams are stalled");

  // One client reads at last: the whole stream, in order, each chunk once.
  const reader = sockets[0];
  const answer = await new Promise<string>((resolve, reject) => {
    const parts: Buffer[] = [];
    let size = 0;
    reader.on("data", (chunk: Buffer) => {
      parts.push(chunk);
      size += chunk.length;
      // The chunked body's end: the run's stream is over.
      if (size >= 5 && chunk.subarray(-5).toString("latin1") === "0\r\n\r\n") resolve(Buffer.concat(parts).toString("latin1"));
    });
    reader.once("error", reject);
    reader.once("close", () => resolve(Buffer.concat(parts).toString("latin1")));
    reader.resume();
  });
  const parsed = parseAnswer(answer);
  t.equal(parsed?.status, 200, "the stream answered 200");
  const events = (parsed?.body ?? "")
    .split("\r\n\r\n")
    .filter((block) => block.startsWith("event: "))
    .map((block) => {
      const lines = block.split("\r\n");
      const field = (name: string) => lines.find((l) => l.startsWith(`${name}: `))?.slice(name.length + 2);
      return { event: field("event"), data: field("data"), id: field("id") };
    });
  const custom = events.filter((e) => e.event === "custom").map((e) => JSON.parse(e.data ?? "null") as { i: number; pad: string });
  t.equal(custom.length, CHUNKS, "every chunk");
  t.ok(
    custom.every((c, k) => c.i === k && c.pad.length === CHUNK_BYTES),
    "in order, whole, each once",
  );
  const ids = events.map((e) => Number(e.id));
  t.ok(
    ids.every((id, k) => k === 0 || id > ids[k - 1]),
    "ids increase",
  );
  t.ok(
    subscriptionBuffers.peakBytes <= (CLIENTS + others) * perStream,
    `still within the bound after the reader caught up (peak ${subscriptionBuffers.peakBytes})`,
  );
  for (const socket of sockets) socket.destroy();
});
