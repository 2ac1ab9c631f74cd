import t from "tap";
import type { EventStore, SubscriptionItem } from "../src/eventstore/types.js";
import { createThread } from "../src/app/threads.js";
import { RunWorker } from "../src/runtime/worker.js";
import { runStream } from "../src/domain/runs.js";
import type { RunRecord } from "../src/domain/run-record.js";
import { gates } from "./support/gates.js";
import { SYSTEM_CALLER } from "../src/app/auth/caller.js";
import { inProcessCore } from "./support/in-process-core.js";

/**
 * A run enqueued at its thread's head is handed to the local worker once the log has committed it,
 * not once the read models show it (they fold only durable events): it is claimed and executed
 * while the read models are held back, exactly once.
 */

/** The store as the read models see it: their subscription delivers nothing while `held` is set. */
function heldBackForReadModels(store: EventStore): { store: EventStore; hold(): void; release(): void } {
  let held: { promise: Promise<void>; release: () => void } | undefined;
  // The log's adapters are plain objects (see withAppend): only the subscription to $all is held back.
  const wrapped: EventStore = {
    ...store,
    subscribeToAll(options) {
      const inner = store.subscribeToAll(options);
      return {
        close: () => inner.close(),
        async *[Symbol.asyncIterator](): AsyncIterator<SubscriptionItem> {
          for await (const item of inner) {
            while (held) await held.promise;
            yield item;
          }
        },
      };
    },
  };
  return {
    store: wrapped,
    hold() {
      let release!: () => void;
      const promise = new Promise<void>((resolve) => (release = resolve));
      held = { promise, release };
    },
    release() {
      const h = held;
      held = undefined;
      h?.release();
    },
  };
}

t.test("a head run starts at its commit, before the read models show it", async (t) => {
  let feed!: ReturnType<typeof heldBackForReadModels>;
  const core = await inProcessCore({
    synchronous: "FULL",
    readModelsFeed: (log) => (feed = heldBackForReadModels(log)).store,
  });
  const { ctx, runs, readModels, store: log } = core;
  const worker = new RunWorker({ ...core.completion, graphs: core.graphs, checkpointer: core.checkpointer, maxConcurrentRuns: 4, exclusiveStore: true, owner: "local" });
  await worker.start();
  const offered: RunRecord[] = [];
  let firstOffered!: (run: RunRecord) => void;
  const offeredFirst = new Promise<RunRecord>((resolve) => (firstOffered = resolve));
  runs.onHeadEnqueued((run) => {
    offered.push(run);
    firstOffered(run);
    worker.offer(run);
  });
  const gate = gates(t);
  t.teardown(async () => {
    feed.release();
    await worker.stop();
    await core.close();
  });

  const thread = await createThread(ctx, { metadata: {}, if_exists: "raise" });
  const request = (body: Record<string, unknown>) => runs.authorize(SYSTEM_CALLER, thread.thread_id, { assistant_id: "delay", on_completion: "keep", ...body } as never);

  feed.hold();
  const folded = readModels.runner.position;
  // The create waits for the read models (read-your-writes): not awaited while they are held.
  const creating = runs.create(await request({ input: { delay: 0, gate: gate.path("first") } }));
  creating.catch(() => undefined);
  let claimedAt: bigint | undefined;
  for await (const item of log.subscribeToStream(runStream((await offeredFirst).run_id))) {
    if (item.kind === "event" && item.event.type === "RunClaimed") {
      claimedAt = item.event.position;
      break;
    }
  }
  t.ok(claimedAt !== undefined, "the run was claimed");
  t.equal(readModels.runner.position, folded, "while the read models had not folded anything since the create");
  t.equal(worker.running, 1, "and it is executing");

  feed.release();
  const first = await creating;
  t.equal(first.run_id, offered[0].run_id);

  // A second run waits behind the first: it is not the head, so it is not offered.
  const second = await runs.create(await request({ input: { delay: 0 }, multitask_strategy: "enqueue" }));
  t.equal(offered.length, 1, "a run queued behind another is not offered");
  gate.open("first");
  await runs.waitDone(first.run_id);
  await runs.waitDone(second.run_id);
  for (const id of [first.run_id, second.run_id]) {
    const events = await log.readStream(runStream(id));
    t.equal(events.filter((e) => e.type === "RunClaimed").length, 1, `one claim for ${id}`);
    t.equal(events.filter((e) => e.type === "RunEnded").length, 1, `one end for ${id}`);
    t.equal(runs.view(id)?.stream.ended?.status, "success");
  }
  t.same(worker.stats, { claimed: 2, lost: 0 }, "no claim was tried twice");
});
