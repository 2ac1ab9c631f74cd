import fs from "node:fs";
import { randomUUID } from "node:crypto";
import t, { type Test } from "tap";
import { threadStream } from "../../src/domain/threads.js";
import type { EventStore, RecordedEvent } from "../../src/eventstore/types.js";
import type { ReadModels } from "../../src/read-models/all.js";
import { logWithReadModels } from "../support/log-with-read-models.js";

/**
 * When the read models fold what the log delivered: at once when someone waits for it (a command's
 * read-your-writes), otherwise after the log's sync in flight, so that the answers waiting for that
 * sync go out first and the events it brings join the same transaction; never later than the bound.
 * The embedded log's WAL syncs are held here until the test releases them, so it decides when each
 * append becomes durable (and is delivered).
 */

/**
 * Holds each WAL sync's report until released, in the order the syncs started (which is the order of what
 * they cover: each covers what was committed before it started). The disk may finish them in another order.
 */
function holdSyncs(t: Test) {
  const original = fs.fdatasync;
  const started: { report?: () => void }[] = [];
  let completed: (() => void) | undefined;
  fs.fdatasync = ((fd: number, callback: (error: NodeJS.ErrnoException | null) => void) => {
    const sync: { report?: () => void } = {};
    started.push(sync);
    original(fd, (error) => {
      sync.report = () => callback(error);
      completed?.();
    });
  }) as typeof fs.fdatasync;
  t.teardown(() => {
    fs.fdatasync = original;
    for (const sync of started.splice(0)) sync.report?.();
  });
  return {
    /** Resolves once the first `n` syncs not yet released have completed on disk. */
    async count(n: number): Promise<void> {
      while (started.length < n || started.slice(0, n).some((sync) => !sync.report)) await new Promise<void>((resolve) => (completed = resolve));
    },
    /** Reports the earliest sync not yet released (it must have completed: see count). */
    release(): void {
      started.shift()!.report!();
    },
  };
}

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

async function createThread(store: EventStore): Promise<{ id: string; position: bigint }> {
  const id = randomUUID();
  const data = { thread_id: id, metadata: {}, created_at: "2026-01-01T00:00:00+00:00" };
  const { position } = await store.append(threadStream(id), [{ type: "ThreadCreated", data }], "no_stream");
  return { id, position };
}

function deliveredAt(models: ReadModels, position: bigint): Promise<RecordedEvent> {
  return new Promise((resolve) => {
    const stop = models.runner.onDelivered((event) => {
      if (event.position !== position) return;
      stop();
      resolve(event);
    });
  });
}

/** Two threads created, each commit's sync held: the first durable, then delivered; the second still in flight. */
async function firstDeliveredSecondInFlight(t: Test, foldDeferMs: number) {
  const { store, readModels: models } = await logWithReadModels(t, "fold-timing-", { synchronous: "FULL", foldDeferMs });
  const syncs = holdSyncs(t);
  const first = await createThread(store);
  const second = await createThread(store);
  await syncs.count(2);
  const before = models.runner.foldStats;
  const delivered = deliveredAt(models, first.position);
  syncs.release();
  await delivered;
  return { store, models, syncs, first, second, before };
}

t.test("a batch nobody waits for waits for the sync in flight, and what that sync brings joins its transaction", async (t) => {
  const { models, syncs, first, second, before } = await firstDeliveredSecondInFlight(t, 60_000);
  await turn();
  await turn();
  t.equal(models.threads.load(first.id), undefined, "delivered, not folded while the next sync is in flight");
  t.equal(models.runner.foldStats.batches, before.batches);
  const both = models.runner.waitFor(second.position);
  syncs.release();
  await both;
  t.ok(models.threads.load(first.id) && models.threads.load(second.id), "both folded once the second is durable");
  t.equal(models.runner.foldStats.batches - before.batches, 1, "in one transaction");
  t.equal(models.runner.foldStats.events - before.events, 2);
});

t.test("a wait for a delivered position folds it at once, whatever sync is in flight", async (t) => {
  const { models, first, second, before } = await firstDeliveredSecondInFlight(t, 60_000);
  await models.runner.waitFor(first.position);
  t.ok(models.threads.load(first.id), "folded for the waiter");
  t.equal(models.threads.load(second.id), undefined, "the second is not durable yet");
  t.equal(models.runner.foldStats.events - before.events, 1);
});

t.test("a request's settle folds what was delivered at once", async (t) => {
  const { models, first, second } = await firstDeliveredSecondInFlight(t, 60_000);
  models.runner.settle();
  t.ok(models.threads.load(first.id), "folded");
  t.equal(models.threads.load(second.id), undefined);
});

t.test("the wait for the sync in flight is bounded", async (t) => {
  const { models, first, second } = await firstDeliveredSecondInFlight(t, 5);
  if (!models.threads.load(first.id)) {
    await new Promise<void>((resolve) => {
      const stop = models.runner.onApplied((event) => {
        if (event.position !== first.position) return;
        stop();
        resolve();
      });
    });
  }
  t.ok(models.threads.load(first.id), "folded once the bound passed");
  t.equal(models.threads.load(second.id), undefined, "while the second sync is still held");
});

t.test("a wait for an event that joins a batch put off folds that batch when the event arrives", async (t) => {
  const { store, readModels: models } = await logWithReadModels(t, "fold-timing-", { synchronous: "FULL", foldDeferMs: 60_000 });
  const syncs = holdSyncs(t);
  const first = await createThread(store);
  const second = await createThread(store);
  const third = await createThread(store);
  await syncs.count(3);
  const before = models.runner.foldStats;
  const delivered = deliveredAt(models, first.position);
  syncs.release(); // the first is durable; its batch is put off, the second's and third's syncs in flight
  await delivered;
  const waited = models.runner.waitFor(second.position);
  syncs.release(); // the second joins that batch; the third's sync stays held
  await waited;
  t.ok(models.threads.load(first.id) && models.threads.load(second.id), "the put-off batch and the awaited event, folded");
  t.equal(models.threads.load(third.id), undefined, "the third is not durable yet");
  t.equal(models.runner.foldStats.batches - before.batches, 1, "in one transaction");
});
