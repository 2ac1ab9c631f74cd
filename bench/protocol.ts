/**
 * Thread streaming protocol (v2) benchmark: for each run of the example graph `agent`, one v2
 * subscription (`POST /threads/{id}/stream/events`, every channel) beside the v1 SSE join
 * (`GET /threads/{id}/runs/{run_id}/stream`) of the same run, both opened as the run is created.
 * Live: time to first event (from the run's creation) and events per second of one subscription
 * (events / time from the first to the last event: bound by the run's own pace). Replay: once
 * every run has ended, each run's events read again from the log by a new subscription (v1:
 * `Last-Event-ID: -1`; v2: `since: 0`), events per second from the request to the last event:
 * what the server itself can stream. p50 over the runs, in the same server process (the esbuild
 * bundle, SQLite). Target: v2 within 1.2x of v1.
 * Run: npm run bench -- protocol [--tiny]   (or npx tsx bench/protocol.ts; prints one JSON object)
 */
import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { parseBenchOptions, type BenchOptions } from "./support/options.js";
import { startBenchServer } from "./support/server.js";
import { perSecond, round2, summary } from "./support/stats.js";

const CHANNELS = ["values", "updates", "messages", "tools", "custom", "lifecycle", "input", "tasks", "checkpoints"];

interface Timing {
  firstMs: number;
  lastMs: number;
  events: number;
}

/** Reads an SSE response until `done(data)` says so (or the response ends); times its events from `t0`. */
async function readSse(response: Response, t0: number, done: (data: string) => boolean): Promise<Timing> {
  const timing: Timing = { firstMs: -1, lastMs: -1, events: 0 };
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(chunk, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\r\n\r\n")) >= 0) {
      const frame = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 4);
      const data = frame.split("\r\n").find((l) => l.startsWith("data: "));
      if (!data || frame.includes("event: metadata")) continue;
      const now = performance.now() - t0;
      if (timing.firstMs < 0) timing.firstMs = now;
      timing.lastMs = now;
      timing.events++;
      if (done(data)) return timing;
    }
  }
  return timing;
}

export async function benchProtocol(options: BenchOptions = { tiny: false, big: false }): Promise<Record<string, unknown>> {
  const runs = options.tiny ? 5 : 100;
  const dataDir = await mkdtemp(path.join(os.tmpdir(), "agent-server-bench-protocol-"));
  const server = await startBenchServer(dataDir, {});
  const json = { "content-type": "application/json" };
  const v1: Timing[] = [];
  const v2: Timing[] = [];
  const ended: { threadId: string; runId: string }[] = [];
  const replay1: Timing[] = [];
  const replay2: Timing[] = [];
  try {
    for (let i = 0; i < runs; i++) {
      const threadId = randomUUID();
      await fetch(`${server.url}/threads`, { method: "POST", headers: json, body: JSON.stringify({ thread_id: threadId }) });
      const t0 = performance.now();
      // The v2 subscription is open before the run exists (as useStream's is); v1 joins the run once it has an id.
      const v2Response = fetch(`${server.url}/threads/${threadId}/stream/events`, {
        method: "POST",
        headers: json,
        body: JSON.stringify({ channels: CHANNELS }),
      });
      const created = await fetch(`${server.url}/threads/${threadId}/runs`, {
        method: "POST",
        headers: json,
        body: JSON.stringify({
          assistant_id: "agent",
          input: { messages: [{ role: "user", content: "hello" }] },
          stream_mode: ["values", "updates", "protocol"],
        }),
      });
      const run = (await created.json()) as { run_id: string };
      const v1Response = fetch(`${server.url}/threads/${threadId}/runs/${run.run_id}/stream`);
      const v2Done = (data: string) =>
        data.includes('"method":"lifecycle"') && /"event":"(completed|failed|interrupted)"/.test(data) && data.includes('"namespace":[]');
      const [a, b] = await Promise.all([v1Response.then((r) => readSse(r, t0, () => false)), v2Response.then((r) => readSse(r, t0, v2Done))]);
      v1.push(a);
      v2.push(b);
      ended.push({ threadId, runId: run.run_id });
    }
    for (const { threadId, runId } of ended) {
      const t1 = performance.now();
      replay1.push(
        await readSse(await fetch(`${server.url}/threads/${threadId}/runs/${runId}/stream`, { headers: { "last-event-id": "-1" } }), t1, () => false),
      );
      const t2 = performance.now();
      const response = await fetch(`${server.url}/threads/${threadId}/stream/events`, {
        method: "POST",
        headers: json,
        body: JSON.stringify({ channels: CHANNELS, since: 0 }),
      });
      replay2.push(
        await readSse(
          response,
          t2,
          (data) => data.includes('"method":"lifecycle"') && /"event":"(completed|failed|interrupted)"/.test(data) && data.includes('"namespace":[]'),
        ),
      );
    }
  } finally {
    await server.stop();
    await rm(dataDir, { recursive: true, force: true });
  }
  const stats = (timings: Timing[]) => ({
    first_event_ms: summary(timings.map((t) => t.firstMs)),
    events_per_run: timings[0]?.events ?? 0,
    events_per_second_p50: round2(summary(timings.map((t) => perSecond(t.events, Math.max(t.lastMs - t.firstMs, 0.001)))).p50_ms),
  });
  const s1 = stats(v1);
  const s2 = stats(v2);
  // A replay's rate counts from the request (the subscription's whole cost), not from its first event.
  const replayRate = (timings: Timing[]) => round2(summary(timings.map((t) => perSecond(t.events, Math.max(t.lastMs, 0.001)))).p50_ms);
  const r1 = replayRate(replay1);
  const r2 = replayRate(replay2);
  return {
    bench: "protocol",
    runs,
    v1_sse: s1,
    v2_protocol: s2,
    first_event_ratio_p50: round2(s2.first_event_ms.p50_ms / s1.first_event_ms.p50_ms),
    replay: {
      v1_events_per_run: replay1[0]?.events ?? 0,
      v2_events_per_run: replay2[0]?.events ?? 0,
      v1_events_per_second_p50: r1,
      v2_events_per_second_p50: r2,
      v1_over_v2_ratio: round2(r1 / r2),
    },
    target: "v2 within 1.2x of v1: time to first event (first_event_ratio_p50 <= 1.2) and replay events/s (v1_over_v2_ratio <= 1.2)",
  };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  console.log(JSON.stringify(await benchProtocol(parseBenchOptions(process.argv.slice(2))), null, 2));
}
