import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import t from "tap";
import { HumanMessage, type BaseMessage } from "@langchain/core/messages";
import type { RunnableConfig } from "@langchain/core/runnables";
import type { Checkpoint, CheckpointTuple } from "@langchain/langgraph-checkpoint";
import { ConfigError, loadConfig } from "../../src/config.js";
import { checkpointEventSchemas, checkpointStream, type CheckpointSaved } from "../../src/domain/checkpoint-events.js";
import { openSqliteStore } from "../../src/eventstore/sqlite.js";
import type { EventStore } from "../../src/eventstore/types.js";
import { withSchemas } from "../../src/eventstore/validating.js";
import { LiveFeed } from "../../src/eventstore/live-feed.js";
import { ThreadCheckpointsCache } from "../../src/runtime/checkpoint-cache.js";
import { DEFAULT_CHECKPOINT_CACHE_THREADS, EventSourcedCheckpointSaver } from "../../src/runtime/checkpointer.js";
import { describeThread } from "../../projections/checkpoints.js";
import { chatGraph } from "../support/chat-graph.js";

// The checkpointer's bounded read model: per-thread folds in an LRU, kept consistent with the log.

async function openStore(t: { teardown(fn: () => Promise<void>): void }): Promise<EventStore> {
  const dir = mkdtempSync(path.join(tmpdir(), "checkpoint-cache-test-"));
  const store = withSchemas(await openSqliteStore({ path: path.join(dir, "events.sqlite") }), (type) =>
    Object.hasOwn(checkpointEventSchemas, type) ? checkpointEventSchemas[type] : undefined,
  );
  t.teardown(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return store;
}

const thread = (id: string): RunnableConfig => ({ configurable: { thread_id: id } });
const contents = (messages: BaseMessage[]) => messages.map((m) => [m.getType(), m.content]);

async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

/** Checkpoint ids sort like time-ordered uuid6 ids do. */
const checkpointId = (n: number) => `1ef00000-0000-6000-8000-${n.toString().padStart(12, "0")}`;
function checkpoint(n: number, channelVersions: Record<string, number> = {}): Checkpoint {
  return { v: 4, id: checkpointId(n), ts: new Date(n).toISOString(), channel_values: {}, channel_versions: channelVersions, versions_seen: {} };
}

/** What a client sees of a thread: every tuple of its history, newest first. */
async function history(saver: EventSourcedCheckpointSaver, threadId: string): Promise<CheckpointTuple[]> {
  return collect(saver.list(thread(threadId)));
}

/** The thread's checkpoints as a fresh saver folds them from the log alone. */
async function refolded(store: EventStore, threadId: string): Promise<unknown> {
  return describeThread(await new EventSourcedCheckpointSaver({ store }).cache.get(threadId));
}

t.test("eviction: a thread dropped from the cache reads back identical from its stream", async (t) => {
  const store = await openStore(t);
  const saver = new EventSourcedCheckpointSaver({ store, cacheThreads: 2 });
  const graph = chatGraph(saver);
  await graph.invoke({ messages: [new HumanMessage({ id: "h-1", content: "one" })] }, thread("a"));
  await graph.invoke({ messages: [new HumanMessage({ id: "h-2", content: "two" })] }, thread("a"));
  const heldState = describeThread(await saver.cache.get("a"));
  const heldHistory = await history(saver, "a");
  const heldValues = (await graph.getState(thread("a"))).values;

  await graph.invoke({ messages: [new HumanMessage({ id: "h-b", content: "b" })] }, thread("b"));
  await graph.invoke({ messages: [new HumanMessage({ id: "h-c", content: "c" })] }, thread("c"));
  t.notOk(saver.cache.has("a"), "the least recently used thread was dropped");
  t.equal(saver.cache.size, 2);

  t.same(await history(saver, "a"), heldHistory, "same history after the reload");
  t.same((await graph.getState(thread("a"))).values, heldValues, "same state");
  t.ok(saver.cache.has("a"), "and it is held again");
  t.same(describeThread(await saver.cache.get("a")), heldState, "the reloaded fold equals the incrementally built one");

  const third = await graph.invoke({ messages: [new HumanMessage({ id: "h-3", content: "three" })] }, thread("a"));
  t.same(
    contents(third.messages).slice(-2),
    [
      ["human", "three"],
      ["ai", "echo: three"],
    ],
    "the thread goes on after the reload",
  );
  t.same(describeThread(await saver.cache.get("a")), await refolded(store, "a"));
});

t.test("another writer's append is seen: by a fresh read, and by our next append (gap → catch-up)", async (t) => {
  const store = await openStore(t);
  // Two savers on one log, each with its own cache: two processes on a shared EventStoreDB.
  const mine = new EventSourcedCheckpointSaver({ store });
  const theirs = new EventSourcedCheckpointSaver({ store });
  const first = await mine.put(thread("t"), checkpoint(1), { source: "input", step: -1, parents: {} }, {});
  t.notOk(mine.cache.has("t"), "an append does not load a thread");
  await mine.getTuple(first);
  t.ok(mine.cache.has("t"), "a read does");

  const second = await theirs.put(first, checkpoint(2), { source: "loop", step: 0, parents: {} }, {});
  t.equal((await mine.getTuple(thread("t")))?.checkpoint.id, checkpointId(1), "without a live feed, a held thread is what this process saw");
  t.equal(await mine.latestCheckpointId("t"), checkpointId(2), "a fresh read catches up with the stream");
  t.equal((await mine.getTuple(thread("t")))?.checkpoint.id, checkpointId(2), "and the cache keeps what it caught up with");

  // Their write lands between two of ours: our append result shows the gap, we read what we missed.
  await theirs.put(second, checkpoint(3), { source: "loop", step: 1, parents: {} }, {});
  await theirs.putWrites({ configurable: { ...second.configurable, checkpoint_id: checkpointId(3) } }, [["x", 1]], "their-task");
  await mine.put(second, checkpoint(4), { source: "loop", step: 2, parents: {} }, {});
  t.same(
    (await history(mine, "t")).map((c) => c.checkpoint.id),
    [4, 3, 2, 1].map(checkpointId),
    "our cache holds their checkpoint 3 as well as our 4",
  );
  t.same((await mine.getTuple({ configurable: { thread_id: "t", checkpoint_id: checkpointId(3) } }))?.pendingWrites, [["their-task", "x", 1]]);
  t.same(describeThread(await mine.cache.get("t")), await refolded(store, "t"), "identical to a fold of the log");

  // A raw append by a process-like writer, then our copy: copies read the source fresh.
  const raw: CheckpointSaved = {
    thread_id: "t",
    checkpoint_ns: "",
    checkpoint_id: checkpointId(5),
    parent_checkpoint_id: checkpointId(4),
    checkpoint: { v: 4, id: checkpointId(5), ts: new Date(5).toISOString(), channel_versions: {}, versions_seen: {} },
    metadata: { source: "update", step: 3, parents: {} },
    blobs: [],
  };
  await store.append(checkpointStream("t"), [{ type: "CheckpointSaved", data: raw }]);
  await mine.copyThread("t", "t-copy");
  t.equal((await mine.getTuple(thread("t-copy")))?.checkpoint.id, checkpointId(5), "the copy includes the other writer's latest checkpoint");
});

t.test("with a live feed, held threads follow other processes' appends", async (t) => {
  const store = await openStore(t);
  const feed = new LiveFeed(store, { streamPrefixes: ["checkpoints-"] });
  t.teardown(() => feed.close());
  const mine = new EventSourcedCheckpointSaver({ store, live: feed });
  t.teardown(() => mine.close());
  const theirs = new EventSourcedCheckpointSaver({ store });
  const first = await mine.put(thread("t"), checkpoint(1), { source: "input", step: -1, parents: {} }, {});
  await mine.getTuple(first);
  // Wait for their checkpoint 2 itself: our own checkpoint 1 may reach the feed after our put
  // returned (the feed delivers once an event is durable), so "the first event applied" is not it.
  const delivered = new Promise<void>((resolve) =>
    feed.onApplied((event) => {
      if ((event.data as CheckpointSaved).checkpoint_id === checkpointId(2)) resolve();
    }),
  );
  await theirs.put(first, checkpoint(2), { source: "loop", step: 0, parents: {} }, {});
  await delivered;
  t.ok(mine.cache.has("t"), "still held: the event was the next revision");
  t.equal((await mine.getTuple(thread("t")))?.checkpoint.id, checkpointId(2));

  // An event after a gap (here: delivered to the cache out of order) drops the entry instead.
  const cache = new ThreadCheckpointsCache({ store, maxThreads: 10 });
  await cache.get("t");
  const events = await store.readStream(checkpointStream("t"));
  cache.observed({ ...events[1], revision: 5n });
  t.notOk(cache.has("t"), "a gap is never served: the thread is reloaded on next use");
  t.same(describeThread(await cache.get("t")), await refolded(store, "t"));
});

/**
 * Acknowledges committed appends out of order, as network round trips to EventStoreDB may, and
 * counts stream reads (catch-ups).
 */
function reordering(store: EventStore): { store: EventStore; reads(): number } {
  let appends = 0;
  let reads = 0;
  const wrapped: EventStore = {
    ...store,
    async append(stream, events, expected) {
      const k = appends++;
      const result = await store.append(stream, events, expected);
      await new Promise((r) => setTimeout(r, (3 - (k % 4)) * 3));
      return result;
    },
    readStream(stream, options) {
      reads += 1;
      return store.readStream(stream, options);
    },
  };
  return { store: wrapped, reads: () => reads };
}

t.test("concurrent puts and writes on one thread keep revision order; each call sees its own write", async (t) => {
  const { store, reads } = reordering(await openStore(t));
  const saver = new EventSourcedCheckpointSaver({ store, cacheThreads: 3 });
  await saver.put(thread("c"), checkpoint(0), { source: "input", step: -1, parents: {} }, {});
  await saver.getTuple(thread("c"));
  const readsBefore = reads();
  const seenOwn: boolean[] = [];
  await Promise.all(
    Array.from({ length: 40 }, async (_, i) => {
      const n = i + 1;
      const config = await saver.put(thread("c"), checkpoint(n, { ch: n }), { source: "loop", step: n, parents: {} }, { ch: n });
      await saver.putWrites(config, [["out", n]], `task-${n}`);
      const tuple = await saver.getTuple(config);
      seenOwn.push(tuple?.checkpoint.id === checkpointId(n) && tuple.pendingWrites?.length === 1);
    }),
  );
  t.equal(seenOwn.length, 40);
  t.ok(seenOwn.every(Boolean), "every put/putWrites was visible to its caller once it returned");
  t.ok(reads() > readsBefore, "acknowledgements out of order left gaps, closed by reading the stream");
  const log = await store.readStream(checkpointStream("c"));
  t.equal(log.length, 81);
  t.same(describeThread(await saver.cache.get("c")), await refolded(store, "c"), "the cache equals a fold of the log in revision order");
  t.equal((await saver.getTuple(thread("c")))?.checkpoint.id, checkpointId(40), "the latest is the greatest id");
  t.equal((await history(saver, "c")).length, 41);
});

t.test("memory stays bounded in entry count; list() over all threads does not flush the cache", async (t) => {
  const store = await openStore(t);
  const saver = new EventSourcedCheckpointSaver({ store, cacheThreads: 5 });
  // A thread with more events than one page of the `$all` scan in list().
  const busy = await saver.put(thread("busy"), checkpoint(0), { source: "input", step: -1, parents: {} }, {});
  const writes = Array.from({ length: 1100 }, (_, k) => ({
    type: "PendingWritesSaved",
    data: { thread_id: "busy", checkpoint_ns: "", checkpoint_id: busy.configurable?.checkpoint_id, task_id: `task-${k}`, task_path: "", writes: [] },
  }));
  await store.append(checkpointStream("busy"), writes);
  for (let i = 0; i < 50; i += 1) {
    const config = await saver.put(thread(`t-${i}`), checkpoint(i), { source: "input", step: -1, parents: {} }, {});
    await saver.getTuple(config);
    t.ok(saver.cache.size <= 5);
  }
  t.equal(saver.cache.size, 5);
  const held = Array.from({ length: 50 }, (_, i) => `t-${i}`).filter((id) => saver.cache.has(id));
  t.same(held, ["t-45", "t-46", "t-47", "t-48", "t-49"], "the most recently used are kept");

  const all = await collect(saver.list({ configurable: {} }));
  t.equal(all.length, 51, "list without thread_id sees every thread in the log");
  t.same(new Set(all.map((c) => c.config.configurable?.thread_id)).size, 51);
  t.equal(all[all.length - 1].config.configurable?.thread_id, "t-49", "in order of first appearance, past the first page");
  t.same(
    Array.from({ length: 50 }, (_, i) => `t-${i}`).filter((id) => saver.cache.has(id)),
    held,
    "the scan kept the cache as it was",
  );

  await saver.deleteThread("t-3");
  t.equal((await collect(saver.list({ configurable: {} }))).length, 50, "a deleted thread is not listed");
});

t.test("CHECKPOINT_CACHE_THREADS configures the bound", async (t) => {
  t.equal(loadConfig({}).checkpointCacheThreads, DEFAULT_CHECKPOINT_CACHE_THREADS);
  t.equal(loadConfig({ CHECKPOINT_CACHE_THREADS: "25" }).checkpointCacheThreads, 25);
  t.throws(() => loadConfig({ CHECKPOINT_CACHE_THREADS: "0" }), ConfigError);
  t.throws(() => new ThreadCheckpointsCache({ store: {} as EventStore, maxThreads: 0 }), /positive integer/);
});

t.test("the cache accounts each event it folds by the length of the JSON text the store wrote for it", async (t) => {
  const store = await openStore(t);
  const saver = new EventSourcedCheckpointSaver({ store });
  const threadId = "bytes-1";
  await saver.cache.get(threadId); // held from the start, so our appends fold into it
  let config = await saver.put(thread(threadId), checkpoint(1, { messages: 1 }), { source: "input", step: -1, parents: {} }, { messages: 1 });
  config = await saver.put(config, checkpoint(2, { messages: 2 }), { source: "loop", step: 0, parents: {} }, { messages: 2 });
  await saver.putWrites(config, [["messages", "x".repeat(3000)]], "task-1");
  const logged = await store.readStream(checkpointStream(threadId));
  t.ok(logged.length >= 3, "puts and writes are in the thread's stream");
  t.equal(
    saver.cache.bytes,
    logged.reduce((sum, e) => sum + JSON.stringify(e.data).length, 0),
  );
});
