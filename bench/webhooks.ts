/**
 * Webhooks benchmark: the server as a child process (the esbuild bundle, as `npm start` runs it),
 * SQLite store, the example graph `agent`, a receiver on 127.0.0.1 in a worker thread of this process.
 *   - latency from the terminal event (the run's `run_ended_at`) to the receiver, p50/p99, while
 *     64 clients create runs with a webhook (`POST /runs/wait`, stateless)
 *   - deliveries per second at WEBHOOK_CONCURRENCY=64: a backlog of pending deliveries (runs that
 *     ended while the receiver was down) drained by a restarted server once the receiver is up
 * Run: npm run bench -- webhooks [--tiny]
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Worker } from "node:worker_threads";
import { jsonClient, runPool } from "./support/http.js";
import { parseBenchOptions, type BenchOptions } from "./support/options.js";
import { repoRoot, startBenchServer } from "./support/server.js";
import { check, perSecond, summary } from "./support/stats.js";

const FULL = { warmup: 50, latencyRuns: 2_000, backlog: 2_000 };
const TINY = { warmup: 5, latencyRuns: 100, backlog: 100 };
const CONCURRENCY = 64;
const input = { messages: [{ role: "user", content: "hello" }] };

interface Hit {
  at: number;
  runId: string;
  endedAt: number;
  /** When the server built the body (just before sending). */
  sentAt: number;
}

/**
 * The receiver's HTTP server, run in a worker thread: a real receiver is another service, so its
 * clock must not wait behind this process's 64 clients. Posts {at, body} per request it accepts.
 */
const RECEIVER_SOURCE = `
const http = require("node:http");
const { parentPort } = require("node:worker_threads");
let failing = false;
const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c)).on("end", () => {
    if (failing) { res.writeHead(503, { "retry-after": "1" }).end(); return; }
    const at = Date.now();
    res.writeHead(204).end();
    parentPort.postMessage({ kind: "hit", at, body: Buffer.concat(chunks).toString("utf8") });
  });
});
server.keepAliveTimeout = 30000;
parentPort.on("message", (m) => {
  if (m.kind === "failing") { failing = m.value; parentPort.postMessage({ kind: "failing-set" }); }
  else if (m.kind === "listen") server.listen(m.port, "127.0.0.1", () => parentPort.postMessage({ kind: "listening", port: server.address().port }));
  else if (m.kind === "close") { server.closeAllConnections(); server.close(() => parentPort.postMessage({ kind: "closed" })); }
});
`;

/** Counts deliveries; `expect(n)` resolves once n distinct runs were delivered. */
function receiver() {
  const seen = new Map<string, Hit>();
  let waiter: { n: number; resolve: () => void } | undefined;
  const worker = new Worker(RECEIVER_SOURCE, { eval: true });
  const reply = (kind: string) =>
    new Promise<{ port?: number }>((resolve) => {
      const on = (m: { kind: string; port?: number }) => {
        if (m.kind !== kind) return;
        worker.off("message", on);
        resolve(m);
      };
      worker.on("message", on);
    });
  worker.on("message", (m: { kind: string; at: number; body: string }) => {
    if (m.kind !== "hit") return;
    const body = JSON.parse(m.body) as { run_id: string; run_ended_at: string; webhook_sent_at: string };
    if (!seen.has(body.run_id))
      seen.set(body.run_id, { at: m.at, runId: body.run_id, endedAt: Date.parse(body.run_ended_at), sentAt: Date.parse(body.webhook_sent_at) });
    if (waiter && seen.size >= waiter.n) waiter.resolve();
  });
  return {
    seen,
    /** Answer 503 (Retry-After: 1) to every request, or accept again. */
    async setFailing(value: boolean) {
      const done = reply("failing-set");
      worker.postMessage({ kind: "failing", value });
      await done;
    },
    async listen(port = 0) {
      const listening = reply("listening");
      worker.postMessage({ kind: "listen", port });
      return (await listening).port!;
    },
    expect(n: number) {
      return seen.size >= n ? Promise.resolve() : new Promise<void>((resolve) => (waiter = { n, resolve }));
    },
    async close() {
      const closed = reply("closed");
      worker.postMessage({ kind: "close" });
      await closed;
      await worker.terminate();
    },
  };
}

export async function benchWebhooks(options: BenchOptions = { tiny: false, big: false }): Promise<Record<string, unknown>> {
  const size = options.tiny ? TINY : FULL;
  const dir = await mkdtemp(path.join(os.tmpdir(), "agent-server-bench-webhooks-"));
  const config = path.join(dir, "langgraph.json");
  await writeFile(
    config,
    JSON.stringify({
      graphs: { agent: path.join(repoRoot, "src/graphs/agent.ts:graph") },
      // The receiver is on 127.0.0.1.
      webhooks: { url: { disable_private_ips: false } },
    }),
  );
  const env = { LANGGRAPH_JSON: config, N_JOBS_PER_WORKER: String(CONCURRENCY), WEBHOOK_CONCURRENCY: String(CONCURRENCY) };
  const rx = receiver();
  const port = await rx.listen();
  const hook = `http://127.0.0.1:${port}/hook?token=bench`;
  try {
    const progress = (m: string) => process.stderr.write(`webhooks bench: ${m}\n`);
    // 1. Latency under load.
    const dataA = path.join(dir, "a");
    const server = await startBenchServer(dataA, env);
    const client = jsonClient(server.url, CONCURRENCY * 2);
    let latencyResult: ReturnType<typeof summary> & { runs_per_s_with_webhooks: number; ended_to_sent_p50_ms: number; sent_to_received_p50_ms: number };
    let idle: ReturnType<typeof summary>;
    try {
      for (let i = 0; i < size.warmup; i++) await client.post("/runs/wait", { assistant_id: "agent", input, webhook: hook });
      await rx.expect(size.warmup);
      progress("warmed up");
      // Idle: one run at a time.
      const idleBefore = rx.seen.size;
      for (let i = 0; i < size.warmup; i++) {
        await client.post("/runs/wait", { assistant_id: "agent", input, webhook: hook });
        await rx.expect(idleBefore + i + 1);
      }
      idle = summary([...rx.seen.values()].slice(idleBefore).map((h) => h.at - h.endedAt));
      const before = rx.seen.size;
      const ms = await runPool(size.latencyRuns, CONCURRENCY, async () => {
        await client.post("/runs/wait", { assistant_id: "agent", input, webhook: hook });
      });
      await rx.expect(before + size.latencyRuns);
      progress("latency measured");
      const measured = [...rx.seen.values()].slice(before);
      const latency = summary(measured.map((h) => h.at - h.endedAt));
      latencyResult = {
        ...latency,
        // The two legs: terminal event → the server sends (log, read model, dispatcher), then sending → received.
        ended_to_sent_p50_ms: summary(measured.map((h) => h.sentAt - h.endedAt)).p50_ms,
        sent_to_received_p50_ms: summary(measured.map((h) => h.at - h.sentAt)).p50_ms,
        runs_per_s_with_webhooks: perSecond(size.latencyRuns, ms),
      };
    } finally {
      await client.close();
      await server.stop();
    }

    // 2. Drain rate: runs end while the receiver answers 503 (Retry-After: 1 s); the server stops;
    // a restarted one finds every delivery due and drains the backlog once the receiver accepts.
    await rx.setFailing(true);
    const dataB = path.join(dir, "b");
    const retrying = { ...env, WEBHOOK_MAX_ATTEMPTS: "1000" };
    const first = await startBenchServer(dataB, retrying);
    const c1 = jsonClient(first.url, CONCURRENCY * 2);
    try {
      await runPool(size.backlog, CONCURRENCY, async () => {
        await c1.post("/runs/wait", { assistant_id: "agent", input, webhook: `${hook}&phase=backlog` });
      });
    } finally {
      await c1.close();
      await first.stop();
    }
    progress("backlog made");
    // Every retry is due within a second of the stop; wait that second so the whole backlog is due at start.
    await new Promise((r) => setTimeout(r, 1_100));
    await rx.setFailing(false);
    const before = rx.seen.size;
    const t0 = performance.now();
    const second = await startBenchServer(dataB, retrying);
    let drainMs: number;
    try {
      await rx.expect(before + size.backlog);
      drainMs = performance.now() - t0 - second.startMs;
    } finally {
      await second.stop();
    }
    const rate = perSecond(size.backlog, drainMs);
    return {
      concurrency: CONCURRENCY,
      latency_terminal_event_to_receiver: latencyResult,
      latency_idle_one_run_at_a_time: idle!,
      backlog_drain: { deliveries: size.backlog, ms: Math.round(drainMs), deliveries_per_s: rate },
      checks: { latency_p50: check(latencyResult.p50_ms, { max: 20, unit: "ms" }) },
    };
  } finally {
    await rx.close().catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(JSON.stringify(await benchWebhooks(parseBenchOptions(process.argv.slice(2))), null, 2));
}
