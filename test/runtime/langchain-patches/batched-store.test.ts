import t from "tap";
import { AsyncBatchedStore, InMemoryStore, type Operation } from "@langchain/langgraph-checkpoint";
import { drainBatchedStoresOnDemand } from "../../../src/runtime/langchain-patches/index.js";

/** Timers the process holds now (a polling loop holds one at all times). */
const timers = () => process.getActiveResourcesInfo().filter((r) => r === "Timeout").length;

t.test("AsyncBatchedStore drains on demand: no timer while it waits, one batch per turn, batches in order", async (t) => {
  t.ok(drainBatchedStoresOnDemand(), "installed");
  t.ok(drainBatchedStoresOnDemand(), "installing again is harmless");
  const inner = new InMemoryStore();
  const batches: Operation[][] = [];
  const batch = inner.batch.bind(inner);
  inner.batch = (async (operations: Operation[]) => {
    batches.push(operations);
    return batch(operations);
  }) as typeof inner.batch;
  const store = new AsyncBatchedStore(inner);
  const before = timers();
  await store.start();
  t.ok(store.isRunning);
  await new Promise((resolve) => setImmediate(resolve));
  t.equal(timers(), before, "running, asked nothing: no timer");

  // Issued in one turn: one batch, each answered with its own result.
  await store.put(["ns"], "a", { n: 1 });
  batches.length = 0;
  const [found, missing] = await Promise.all([store.get(["ns"], "a"), store.get(["ns"], "b"), store.put(["ns"], "z", { n: 26 })]);
  t.equal(batches.length, 1, "one batch for the turn");
  t.equal(batches[0].length, 3, "holding the three operations");
  t.same(found?.value, { n: 1 }, "the first get's result");
  t.equal(missing, null, "the second get's result");

  // A put whose batch is still running, then a get: the get's batch waits for it.
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  inner.batch = (async (operations: Operation[]) => {
    batches.push(operations);
    if (operations.some((o) => "value" in o && o.value !== null)) await held;
    return batch(operations);
  }) as typeof inner.batch;
  const put = store.put(["ns"], "c", { n: 3 });
  await new Promise((resolve) => setImmediate(resolve)); // the put's batch starts, and waits
  const get = store.get(["ns"], "c");
  release();
  await put;
  t.same((await get)?.value, { n: 3 }, "batches run one after the other");

  await store.stop();
  t.notOk(store.isRunning);
  t.equal(timers(), before, "stopped: nothing left behind");
});
