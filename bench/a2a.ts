/**
 * A2A benchmark: `message/send` (JSON-RPC, new context each) beside `runs/wait` on a new thread
 * (`if_not_exists: "create"`, the same work: create the thread, run, wait) in the same server
 * process: the esbuild bundle, SQLite synchronous=FULL, the example graph `agent`, undici
 * keep-alive on 127.0.0.1. Sequential latency p50/p99 and throughput at concurrency 16.
 * Target: message/send within 1.2x of runs/wait.
 * Run: npm run bench -- a2a [--tiny]   (or npx tsx bench/a2a.ts; prints one JSON object)
 */
import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { jsonClient, runPool } from "./support/http.js";
import { parseBenchOptions, type BenchOptions } from "./support/options.js";
import { startBenchServer } from "./support/server.js";
import { perSecond, round2, summary } from "./support/stats.js";

const FULL = { warmup: 50, sequential: 200, throughput: 1_000 };
const TINY = { warmup: 5, sequential: 20, throughput: 80 };
const CONCURRENCY = 16;

export async function benchA2A(options: BenchOptions = { tiny: false, big: false }): Promise<Record<string, unknown>> {
  const size = options.tiny ? TINY : FULL;
  const dataDir = await mkdtemp(path.join(os.tmpdir(), "agent-server-bench-a2a-"));
  const server = await startBenchServer(dataDir, { N_JOBS_PER_WORKER: "64" }).catch(async (error: unknown) => {
    await rm(dataDir, { recursive: true, force: true });
    throw error;
  });
  const client = jsonClient(server.url, 64);
  let n = 0;
  const jobs = {
    runs_wait: async () => {
      const out = await client.post(`/threads/${randomUUID()}/runs/wait`, {
        assistant_id: "agent",
        if_not_exists: "create",
        input: { messages: [{ role: "user", content: "hello" }] },
      });
      if (!JSON.stringify(out).includes("You said: hello")) throw new Error(`unexpected result ${JSON.stringify(out)}`);
    },
    message_send: async () => {
      const out = await client.post<{ result?: { artifacts?: { parts: { text: string }[] }[] } }>("/a2a/agent", {
        jsonrpc: "2.0",
        id: ++n,
        method: "message/send",
        params: { message: { kind: "message", role: "user", messageId: randomUUID(), parts: [{ kind: "text", text: "hello" }] } },
      });
      if (out.result?.artifacts?.[0]?.parts[0]?.text !== "You said: hello") throw new Error(`unexpected result ${JSON.stringify(out)}`);
    },
  };
  type Name = keyof typeof jobs;
  try {
    for (let i = 0; i < size.warmup; i++) {
      await jobs.runs_wait();
      await jobs.message_send();
    }
    // Interleaved rounds so both see the same log size and machine load.
    const latencies: Record<Name, number[]> = { runs_wait: [], message_send: [] };
    for (let i = 0; i < size.sequential; i++) {
      for (const name of Object.keys(jobs) as Name[]) {
        const t0 = performance.now();
        await jobs[name]();
        latencies[name].push(performance.now() - t0);
      }
    }
    // Throughput in ABBA order (wait, send, send, wait): neither side gets the smaller log.
    const ms: Record<Name, number> = { runs_wait: 0, message_send: 0 };
    for (const name of ["runs_wait", "message_send", "message_send", "runs_wait"] as const) {
      ms[name] += await runPool(size.throughput / 2, CONCURRENCY, () => jobs[name]());
    }
    const out = Object.fromEntries(
      (Object.keys(jobs) as Name[]).map((name) => [name, { sequential: summary(latencies[name]), c16_per_s: perSecond(size.throughput, ms[name]) }]),
    ) as Record<Name, { sequential: ReturnType<typeof summary>; c16_per_s: number }>;
    return {
      setup: {
        mode: options.tiny ? "tiny" : "full",
        store: "sqlite synchronous=FULL",
        graph: "agent (src/graphs/agent.ts)",
        client: "undici keep-alive, 127.0.0.1",
        concurrency: CONCURRENCY,
      },
      ...out,
      ratio: {
        p50_send_over_wait: round2(out.message_send.sequential.p50_ms / out.runs_wait.sequential.p50_ms),
        p99_send_over_wait: round2(out.message_send.sequential.p99_ms / out.runs_wait.sequential.p99_ms),
        c16_wait_over_send: round2(out.runs_wait.c16_per_s / out.message_send.c16_per_s),
      },
      target: "message/send within 1.2x of runs/wait",
    };
  } finally {
    await server.stop();
    await client.close();
    await rm(dataDir, { recursive: true, force: true });
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  console.log(JSON.stringify(await benchA2A(parseBenchOptions(process.argv.slice(2))), null, 2));
}
