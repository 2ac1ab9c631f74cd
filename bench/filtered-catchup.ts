/**
 * Filtered catch-up on SQLite: a log shaped like the server's, where ~95 % of the bytes are RunOutput and
 * CheckpointSaved events, read from the start by a subscription filtered to the other event types (what the
 * boot subscription of the read models asks for). Reports events of the log per second and events delivered.
 * Each read is done 3 times (ROUNDS=n for more) on a freshly opened store; the median is reported with every run,
 * as wall time and as CPU time of the process (the better measure on a shared machine: the read is synchronous).
 * Run: npx tsx bench/filtered-catchup.ts [runs-in-log]   (prints one JSON object)
 */
import { randomUUID } from "node:crypto";
import { mkdtemp, rm, stat } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { openSqliteStore } from "../src/eventstore/sqlite.js";
import type { EventData } from "../src/eventstore/types.js";
import { median } from "./support/stats.js";

const ROUNDS = Number(process.env.ROUNDS ?? 3);
const WANTED = ["ThreadCreated", "RunEnqueued", "RunClaimed", "RunEnded", "RunFinished"];

const text = (n: number) => "The quick brown fox jumps over the lazy dog. ".repeat(Math.ceil(n / 45)).slice(0, n);

/** The events of one run on a new thread, by stream; sizes chosen so that outputs and checkpoints are ~95 % of the bytes. */
function oneRun(): [string, EventData[]][] {
  const threadId = randomUUID();
  const runId = randomUUID();
  const small = (type: string, extra: Record<string, unknown> = {}): EventData => ({
    type,
    data: { thread_id: threadId, run_id: runId, at: new Date().toISOString(), ...extra },
  });
  const big = (type: string, n: number, bytes: number): EventData => ({ type, data: { thread_id: threadId, n, blob: text(bytes) } });
  return [
    [`thread-${threadId}`, [small("ThreadCreated"), small("RunEnqueued", { kwargs: { input: text(200) } })]],
    [`run-${runId}`, [small("RunClaimed"), ...Array.from({ length: 4 }, (_, i) => big("RunOutput", i, 2_000))]],
    [`checkpoints-${threadId}`, Array.from({ length: 3 }, (_, i) => big("CheckpointSaved", i, 5_000))],
    [`run-${runId}`, [small("RunEnded", { values: text(150) })]],
    [`thread-${threadId}`, [small("RunFinished", { values: text(150) })]],
  ];
}

export async function benchFilteredCatchUp(runs = 10_000): Promise<Record<string, unknown>> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "bench-filtered-catchup-"));
  const file = path.join(dir, "events.sqlite");
  try {
    let store = await openSqliteStore({ path: file, synchronous: "NORMAL" });
    let bytes = 0;
    let wantedBytes = 0;
    for (let r = 0; r < runs; r += 100) {
      const appends: Promise<unknown>[] = [];
      for (let i = r; i < Math.min(runs, r + 100); i++) {
        for (const [stream, events] of oneRun()) {
          for (const e of events) {
            const size = JSON.stringify(e.data).length;
            bytes += size;
            if (WANTED.includes(e.type)) wantedBytes += size;
          }
          appends.push(store.append(stream, events));
        }
      }
      await Promise.all(appends);
    }
    const total = Number(await store.headPosition());
    await store.close();
    const seconds: number[] = [];
    const cpuSeconds: number[] = [];
    let delivered = 0;
    for (let round = 0; round < ROUNDS; round++) {
      store = await openSqliteStore({ path: file, synchronous: "NORMAL" });
      const t0 = performance.now();
      const c0 = process.cpuUsage();
      const sub = store.subscribeToAll({ filter: { eventTypes: WANTED } });
      delivered = 0;
      for await (const item of sub) {
        if (item.kind === "caughtUp") break;
        delivered++;
      }
      seconds.push((performance.now() - t0) / 1000);
      const c = process.cpuUsage(c0);
      cpuSeconds.push((c.user + c.system) / 1e6);
      await sub.close();
      await store.close();
    }
    const s = median(seconds);
    const cpu = median(cpuSeconds);
    return {
      log: { events: total, mib: +((await stat(file)).size / 2 ** 20).toFixed(1), share_of_bytes_filtered_out: +(1 - wantedBytes / bytes).toFixed(3) },
      delivered,
      seconds: +s.toFixed(3),
      log_events_per_s: Math.round(total / s),
      delivered_events_per_s: Math.round(delivered / s),
      runs_s: seconds.map((x) => +x.toFixed(3)),
      cpu_seconds: +cpu.toFixed(3),
      log_events_per_cpu_s: Math.round(total / cpu),
      runs_cpu_s: cpuSeconds.map((x) => +x.toFixed(3)),
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  console.log(JSON.stringify(await benchFilteredCatchUp(Number(process.argv[2] ?? 10_000)), null, 2));
}
