/**
 * Webhooks benchmark: the server as a child process (the esbuild bundle, as `npm start` runs it),
 * SQLite store, the example graph `agent`, a receiver on 127.0.0.1 in this process.
 *   - latency from the terminal event (the run's `run_ended_at`) to the receiver, p50/p99, while
 *     64 clients create runs with a webhook (`POST /runs/wait`, stateless)
 *   - deliveries per second at WEBHOOK_CONCURRENCY=64: a backlog of pending deliveries (runs that
 *     ended while the receiver was down) drained by a restarted server once the receiver is up
 * Run: npm run bench -- webhooks [--tiny]
 */
import http from "node:http";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { AddressInfo } from "node:net";
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

/** Counts deliveries; `expect(n)` resolves once n distinct runs were delivered. */
function receiver() {
  const seen = new Map<string, Hit>();
  let waiter: { n: number; resolve: () => void } | undefined;
  const state = { failing: false };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c)).on("end", () => {
      if (state.failing) {
        res.writeHead(503, { "retry-after": "1" }).end();
        return;
      }
      const at = Date.now();
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { run_id: string; run_ended_at: string; webhook_sent_at: string };
      if (!seen.has(body.run_id)) seen.set(body.run_id, { at, runId: body.run_id, endedAt: Date.parse(body.run_ended_at), sentAt: Date.parse(body.webhook_sent_at) });
      res.writeHead(204).end();
      if (waiter && seen.size >= waiter.n) waiter.resolve();
    });
  });
  server.keepAliveTimeout = 30_000;
  return {
    seen,
    state,
    async listen(port = 0) {
      await new Promise<void>((r) => server.listen(port, "127.0.0.1", r));
      return (server.address() as AddressInfo).port;
    },
    expect(n: number) {
      return seen.size >= n ? Promise.resolve() : new Promise<void>((resolve) => (waiter = { n, resolve }));
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

export async function benchWebhooks(options: BenchOptions = { tiny: false, big: false }): Promise<Record<string, unknown>> {
  const size = options.tiny ? TINY : FULL;
  const dir = await mkdtemp(path.join(os.tmpdir(), "agent-server-bench-webhooks-"));
  const config = path.join(dir, "langgraph.json");
  await writeFile(config, JSON.stringify({
    graphs: { agent: path.join(repoRoot, "src/graphs/agent.ts:graph") },
    // The receiver is on 127.0.0.1.
    webhooks: { url: { disable_private_ips: false } },
  }));
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
    rx.state.failing = true;
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
    rx.state.failing = false;
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
