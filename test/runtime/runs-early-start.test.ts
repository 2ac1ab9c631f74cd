import t from "tap";
import type { EventData, EventStore, SubscriptionItem } from "../../src/eventstore/types.js";
import { threadStream } from "../../src/domain/threads.js";
import { withAppend } from "../../src/eventstore/forwarding.js";
import { createThread } from "../../src/app/threads.js";
import { RunWorker } from "../../src/runtime/worker.js";
import { runStream } from "../../src/domain/runs.js";
import type { RunRecord } from "../../src/domain/run-record.js";
import { gates } from "../support/gates.js";
import { SYSTEM_CALLER } from "../../src/app/auth/caller.js";
import { inProcessCore } from "../support/in-process-core.js";

/**
 * A run enqueued at its thread's head is handed to the local worker as soon as its enqueue is
 * appended, not once the read models show it (they fold only durable events): it is claimed, in an
 * append that depends on the enqueue (the same commit), and executed while the read models are
 * held back, exactly once. A refused enqueue takes its claim with it.
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
  const worker = new RunWorker({
    ...core.completion,
    graphs: core.graphs,
    checkpointer: core.checkpointer,
    maxConcurrentRuns: 4,
    exclusiveStore: true,
    owner: "local",
  });
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
  const request = (body: Record<string, unknown>) =>
    runs.authorize(SYSTEM_CALLER, thread.thread_id, { assistant_id: "delay", on_completion: "keep", ...body } as never);

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
  await runs.lifecycle.waitDone(first.run_id);
  await runs.lifecycle.waitDone(second.run_id);
  for (const id of [first.run_id, second.run_id]) {
    const events = await log.readStream(runStream(id));
    t.equal(events.filter((e) => e.type === "RunClaimed").length, 1, `one claim for ${id}`);
    t.equal(events.filter((e) => e.type === "RunEnded").length, 1, `one end for ${id}`);
    t.equal(runs.view(id)?.stream.ended?.status, "success");
  }
  t.same(worker.stats, { claimed: 2, lost: 0 }, "no claim was tried twice");
});

t.test("a head run's claim is committed with its enqueue, and a refused enqueue writes no claim", async (t) => {
  /** The SQLite commit that wrote each append (by its first event's type), seen as the append resolves. */
  const committedIn = new Map<string, number[]>();
  /** Set by the test: the next RunEnqueued meets a concurrent write to its thread (its expected revision is stale). */
  let interfere = false;
  const core = await inProcessCore({
    synchronous: "FULL",
    wrap: (store, sqlite) =>
      withAppend(store, (stream, events: EventData[], expected, options) => {
        if (interfere && events.some((e) => e.type === "RunEnqueued")) {
          interfere = false;
          // Issued first, so the same commit writes it before the enqueue, which then fails.
          void store.append(stream, [{ type: "ThreadUpdated", data: { metadata: { touched: true }, updated_at: new Date().toISOString() } }], "any");
        }
        return store.append(stream, events, expected, options).then((result) => {
          const list = committedIn.get(events[0].type) ?? [];
          list.push(sqlite.stats().transactions);
          committedIn.set(events[0].type, list);
          return result;
        });
      }),
  });
  const { ctx, runs, store: log } = core;
  const worker = new RunWorker({
    ...core.completion,
    graphs: core.graphs,
    checkpointer: core.checkpointer,
    maxConcurrentRuns: 4,
    exclusiveStore: true,
    owner: "local",
  });
  await worker.start();
  runs.onHeadEnqueued((run, enqueued) => worker.offer(run, enqueued));
  t.teardown(async () => {
    await worker.stop();
    await core.close();
  });
  const request = (threadId: string) =>
    runs.authorize(SYSTEM_CALLER, threadId, { assistant_id: "agent", input: { messages: [{ role: "user", content: "hello" }] } } as never);

  const one = await createThread(ctx, { metadata: {}, if_exists: "raise" });
  const first = await runs.create(await request(one.thread_id));
  await runs.lifecycle.waitDone(first.run_id);
  t.equal(committedIn.get("RunClaimed")?.length, 1);
  t.same(committedIn.get("RunClaimed"), committedIn.get("RunEnqueued"), "the claim was written in the enqueue's commit");

  const two = await createThread(ctx, { metadata: {}, if_exists: "raise" });
  interfere = true;
  const second = await runs.create(await request(two.thread_id));
  t.equal(interfere, false, "the enqueue met a concurrent write");
  await runs.lifecycle.waitDone(second.run_id);
  const thread = await log.readStream(threadStream(two.thread_id));
  t.same(
    thread.map((e) => e.type),
    ["ThreadCreated", "ThreadUpdated", "RunEnqueued", "RunFinished"],
    "the enqueue was decided again and written once",
  );
  const events = await log.readStream(runStream(second.run_id));
  t.equal(events.filter((e) => e.type === "RunClaimed").length, 1, "one claim: the one made with the refused enqueue was not written");
  t.equal(runs.view(second.run_id)?.stream.ended?.status, "success", "the run ran");
  t.same(worker.stats, { claimed: 2, lost: 0 }, "the claim that went with the refused enqueue is not counted as lost");
});
