/**
 * Event store benchmark: SQLite, synchronous=FULL (each append is awaited until durable: the WAL fsynced), ~1 KB JSON events.
 *   (a) single-event appends from 16 concurrent writers (group commit batches them)
 *   (b) appends of 100-event batches
 *   (c) catch-up read rate of subscribeToAll over the whole log
 * Each is measured 3 times; the median is reported with every run.
 * Run: npm run bench -- eventstore [--tiny]   (or npx tsx bench/eventstore.ts; prints one JSON object)
 */
import { mkdtemp, rm, stat } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { openSqliteStore, type SqliteEventStore } from "../src/eventstore/sqlite.js";
import type { EventData } from "../src/eventstore/types.js";
import { parseBenchOptions, type BenchOptions } from "./support/options.js";
import { median } from "./support/stats.js";

const RUNS = 3;
const WRITERS = 16;
const BATCH_SIZE = 100;
const FULL = { singleEvents: 16_000, batches: 300 };
const TINY = { singleEvents: 800, batches: 10 };

/** A ~1 KB JSON payload shaped like a run/message event. */
function payload(n: number): Record<string, unknown> {
  return {
    run_id: `run-${n}`,
    thread_id: "6f1c2a9e-2b7d-4a43-9d3e-0c1b5e8f7a21",
    seq: n,
    status: "running",
    message: {
      role: "assistant",
      content: "The quick brown fox jumps over the lazy dog. ".repeat(16),
      tool_calls: [{ id: "call_1", name: "search", args: { query: "event sourcing", limit: 10 } }],
    },
    tags: ["bench", "eventstore", "sqlite"],
  };
}

function event(n: number): EventData {
  return { type: "BenchEvent", data: payload(n), metadata: { source: "bench" } };
}

function rate(events: number, ms: number): number {
  return Math.round((events / ms) * 1000);
}

/** Runs a measurement RUNS times; reports the median rate and every run (the machine may be shared). */
async function measure(
  events: number,
  run: (round: number) => Promise<void>,
  store: SqliteEventStore,
): Promise<{ events: number; eventsPerSecond: number; runs: number[]; transactions: number }> {
  const rates: number[] = [];
  const s0 = store.stats();
  for (let round = 0; round < RUNS; round++) {
    const t0 = performance.now();
    await run(round);
    rates.push(rate(events, performance.now() - t0));
  }
  const transactions = Math.round((store.stats().transactions - s0.transactions) / RUNS);
  return { events, eventsPerSecond: median(rates), runs: rates, transactions };
}

export async function benchEventStore(options: BenchOptions = { tiny: false, big: false }): Promise<Record<string, unknown>> {
  const { singleEvents: SINGLE_EVENTS, batches: BATCHES } = options.tiny ? TINY : FULL;
  const dir = await mkdtemp(path.join(os.tmpdir(), "bench-eventstore-"));
  const file = path.join(dir, "events.sqlite");
  try {
    const store = await openSqliteStore({ path: file, synchronous: "FULL" });
    const eventBytes = JSON.stringify(payload(12345)).length;

    // (a) 16 writers, single-event appends, each with an expected revision on its own stream.
    const perWriter = SINGLE_EVENTS / WRITERS;
    const single = await measure(
      SINGLE_EVENTS,
      (round) =>
        Promise.all(
          Array.from({ length: WRITERS }, async (_, w) => {
            let expected: bigint | "no_stream" = "no_stream";
            for (let i = 0; i < perWriter; i++) {
              expected = (await store.append(`single${round}-${w}`, [event(i)], expected)).nextExpectedRevision;
              await store.whenDurable(); // acknowledged as a client would be: on disk
            }
          }),
        ).then(() => undefined),
      store,
    );

    // (b) 100-event batches from one writer, each awaited before the next, round-robin over 10 streams.
    const batch = await measure(
      BATCH_SIZE * BATCHES,
      async (round) => {
        const expected: (bigint | "no_stream")[] = Array(10).fill("no_stream");
        for (let b = 0; b < BATCHES; b++) {
          const events = Array.from({ length: BATCH_SIZE }, (_, i) => event(b * BATCH_SIZE + i));
          expected[b % 10] = (await store.append(`batch${round}-${b % 10}`, events, expected[b % 10])).nextExpectedRevision;
          await store.whenDurable();
        }
      },
      store,
    );

    // (c) catch-up: subscribeToAll from the start of the whole log until caughtUp.
    const total = Number(await store.headPosition()); // SQLite positions are 1, 2, 3, …
    const catchUp = await measure(
      total,
      async () => {
        const sub = store.subscribeToAll();
        let read = 0;
        for await (const item of sub) {
          if (item.kind === "caughtUp") break;
          read++;
        }
        await sub.close();
        if (read !== total) throw new Error(`catch-up read ${read} events, expected ${total}`);
      },
      store,
    );

    await store.close();
    const { size } = await stat(file);
    return {
      mode: options.tiny ? "tiny" : "full",
      adapter: "sqlite",
      synchronous: "FULL",
      eventBytes,
      dbBytes: size,
      singleAppends16Writers: { writers: WRITERS, ...single, appendsPerTransaction: Math.round(SINGLE_EVENTS / single.transactions) },
      batchAppends100: { writers: 1, batchSize: BATCH_SIZE, ...batch },
      catchUpSubscribeToAll: { events: catchUp.events, eventsPerSecond: catchUp.eventsPerSecond, runs: catchUp.runs },
      targets: { singleAppends16Writers: 10_000, batchAppends100: 40_000, catchUpSubscribeToAll: 100_000 },
      met: single.eventsPerSecond >= 10_000 && batch.eventsPerSecond >= 40_000 && catchUp.eventsPerSecond >= 100_000,
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  console.log(JSON.stringify(await benchEventStore(parseBenchOptions(process.argv.slice(2)))));
}
