import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import t from "tap";
import { AIMessage, HumanMessage, type BaseMessage } from "@langchain/core/messages";
import type { RunnableConfig } from "@langchain/core/runnables";
import { Command, END, START, StateGraph, interrupt } from "@langchain/langgraph";
import type { CheckpointTuple } from "@langchain/langgraph-checkpoint";
import { checkpointEventSchemas, checkpointStream } from "../../src/domain/checkpoint-events.js";
import { openSqliteStore } from "../../src/eventstore/sqlite.js";
import type { EventStore } from "../../src/eventstore/types.js";
import { withSchemas } from "../../src/eventstore/validating.js";
import { DEFER_CHECKPOINT_WRITES, EventSourcedCheckpointSaver } from "../../src/runtime/checkpointer.js";
import { describeThread } from "../../projections/checkpoints.js";
import { ChatState, chatGraph } from "../support/chat-graph.js";

// Tiny offline graphs: a counter that answers every human message, and one that asks a question.

function askGraph(checkpointer: EventSourcedCheckpointSaver) {
  return new StateGraph(ChatState)
    .addNode("ask", () => {
      const answer = interrupt({ question: "Continue?" });
      return { messages: [new AIMessage({ id: "ai-answer", content: `You answered: ${String(answer)}` })] };
    })
    .addEdge(START, "ask")
    .addEdge("ask", END)
    .compile({ checkpointer });
}

interface Opened {
  store: EventStore;
  saver: EventSourcedCheckpointSaver;
  close(): Promise<void>;
}

/** Opens the store in `dir`; the saver folds each thread's stream when it is first used. */
async function open(dir: string): Promise<Opened> {
  const store = withSchemas(await openSqliteStore({ path: path.join(dir, "events.sqlite") }), (type) =>
    Object.hasOwn(checkpointEventSchemas, type) ? checkpointEventSchemas[type] : undefined,
  );
  const saver = new EventSourcedCheckpointSaver({ store });
  return {
    store,
    saver,
    async close() {
      await store.close();
    },
  };
}

const tempDir = () => mkdtempSync(path.join(tmpdir(), "checkpointer-test-"));

/** Closes the store currently open in `dir` (the test may have reopened it), then removes `dir`. */
function cleanUp(t: { teardown(fn: () => Promise<void>): void }, dir: string, current: () => Opened): void {
  t.teardown(async () => {
    await current().close();
    rmSync(dir, { recursive: true, force: true });
  });
}

const contents = (messages: BaseMessage[]) => messages.map((m) => [m.getType(), m.content]);
const thread = (id: string): RunnableConfig => ({ configurable: { thread_id: id } });

async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

/** What a client sees of a thread: values, next nodes, and every checkpoint of its history. */
async function picture(graph: ReturnType<typeof chatGraph>, config: RunnableConfig) {
  const state = await graph.getState(config);
  const history = await collect(graph.getStateHistory(config));
  return {
    values: contents((state.values as { messages?: BaseMessage[] }).messages ?? []),
    next: state.next,
    config: state.config,
    history: history.map((h) => ({
      config: h.config,
      parentConfig: h.parentConfig,
      metadata: h.metadata,
      next: h.next,
      created_at: h.createdAt,
      messages: contents((h.values as { messages?: BaseMessage[] }).messages ?? []),
    })),
  };
}

t.test("a compiled StateGraph keeps its state on the event log", async (t) => {
  const dir = tempDir();
  let opened = await open(dir);
  cleanUp(t, dir, () => opened);
  let graph = chatGraph(opened.saver);

  await graph.invoke({ messages: [new HumanMessage({ id: "h-1", content: "hello" })] }, thread("t-1"));
  const second = await graph.invoke({ messages: [new HumanMessage({ id: "h-2", content: "again" })] }, thread("t-1"));
  t.same(
    contents(second.messages),
    [
      ["human", "hello"],
      ["ai", "echo: hello"],
      ["human", "again"],
      ["ai", "echo: again"],
    ],
    "the second invoke continues the first",
  );

  const before = await picture(graph, thread("t-1"));
  t.same(before.values, contents(second.messages), "getState returns the values");
  t.same(before.next, []);
  // Two invokes × (input, loop start, after reply) checkpoints, newest first.
  t.equal(before.history.length, 6);
  t.same(
    before.history.map((h) => h.metadata?.source),
    ["loop", "loop", "input", "loop", "loop", "input"],
  );
  t.same(before.history[0].config, before.config, "the newest history entry is the current state");
  for (let i = 0; i < before.history.length - 1; i += 1) {
    t.same(before.history[i].parentConfig?.configurable?.checkpoint_id, before.history[i + 1].config.configurable?.checkpoint_id);
  }
  t.equal(before.history[5].parentConfig, undefined, "the first checkpoint has no parent");
  t.same(
    before.history[3].messages,
    [
      ["human", "hello"],
      ["ai", "echo: hello"],
    ],
    "history has past values",
  );

  // Time travel: the state as of an earlier checkpoint.
  const past = await graph.getState(before.history[3].config);
  t.same(contents((past.values as { messages: BaseMessage[] }).messages), [
    ["human", "hello"],
    ["ai", "echo: hello"],
  ]);

  const events = await opened.store.readStream(checkpointStream("t-1"));
  t.same([...new Set(events.map((e) => e.type))].sort(), ["CheckpointSaved", "PendingWritesSaved"], "the graph's checkpoints are events");
  t.equal(events.filter((e) => e.type === "CheckpointSaved").length, 6);

  // Close and reopen: the new saver folds the thread's stream from the start and gives the same state.
  const snapshot = describeThread(await opened.saver.cache.get("t-1"));
  await opened.close();
  opened = await open(dir);
  graph = chatGraph(opened.saver);
  t.same(await picture(graph, thread("t-1")), before, "state and history are identical after a rebuild");
  t.same(describeThread(await opened.saver.cache.get("t-1")), snapshot, "the rebuilt read model equals the live one");

  // And the thread goes on from there.
  const third = await graph.invoke({ messages: [new HumanMessage({ id: "h-3", content: "third" })] }, thread("t-1"));
  t.equal(third.messages.length, 6);

  await opened.saver.deleteThread("t-1");
  const gone = await graph.getState(thread("t-1"));
  t.same(gone.values, {}, "deleteThread empties the state");
  t.same(await collect(graph.getStateHistory(thread("t-1"))), [], "and the history");
  t.equal(await opened.saver.getTuple(thread("t-1")), undefined);
  const log = await opened.store.readStream(checkpointStream("t-1"));
  t.equal(log[log.length - 1].type, "CheckpointsDeleted", "deletion is an event; the log keeps the past");

  const fresh = await graph.invoke({ messages: [new HumanMessage({ id: "h-9", content: "new start" })] }, thread("t-1"));
  t.same(
    contents(fresh.messages),
    [
      ["human", "new start"],
      ["ai", "echo: new start"],
    ],
    "a deleted thread starts afresh",
  );
});

t.test("an interrupted run resumes after a restart, from the log alone", async (t) => {
  const dir = tempDir();
  let opened = await open(dir);
  cleanUp(t, dir, () => opened);
  let graph = askGraph(opened.saver);

  await graph.invoke({ messages: [new HumanMessage({ id: "h-1", content: "go" })] }, thread("t-ask"));
  let state = await graph.getState(thread("t-ask"));
  t.same(state.next, ["ask"]);
  t.same(
    state.tasks[0]?.interrupts.map((i) => i.value),
    [{ question: "Continue?" }],
    "the interrupt is a pending write",
  );

  await opened.close();
  opened = await open(dir);
  graph = askGraph(opened.saver);
  state = await graph.getState(thread("t-ask"));
  t.same(state.next, ["ask"], "still waiting after the restart");
  t.same(
    state.tasks[0]?.interrupts.map((i) => i.value),
    [{ question: "Continue?" }],
  );

  const resumed = await graph.invoke(new Command({ resume: "yes" }), thread("t-ask"));
  t.same(contents(resumed.messages), [
    ["human", "go"],
    ["ai", "You answered: yes"],
  ]);
  t.same((await graph.getState(thread("t-ask"))).next, []);
});

t.test("copyThread gives the target the same state and history, then they diverge", async (t) => {
  const dir = tempDir();
  const opened = await open(dir);
  cleanUp(t, dir, () => opened);
  const graph = chatGraph(opened.saver);

  await graph.invoke({ messages: [new HumanMessage({ id: "h-1", content: "one" })] }, thread("src"));
  await graph.invoke({ messages: [new HumanMessage({ id: "h-2", content: "two" })] }, thread("src"));
  await opened.saver.copyThread("src", "dst");

  const src = await picture(graph, thread("src"));
  const dst = await picture(graph, thread("dst"));
  const withoutThread = (p: typeof src) => JSON.parse(JSON.stringify(p).replaceAll('"thread_id":"src"', '"thread_id":"dst"'));
  t.same(dst, withoutThread(src), "same values, checkpoints, parents and metadata, on the new thread id");

  const copied = await opened.store.readStream(checkpointStream("dst"));
  t.equal(copied[0].type, "CheckpointsCopied");
  t.match(copied[0].data, { thread_id: "dst", from_thread_id: "src", checkpoints: 6, events: copied.length - 2 });
  t.equal(copied.at(-1)?.type, "CheckpointsSnapshot", "the copy ends with a snapshot of its fold");

  await graph.invoke({ messages: [new HumanMessage({ id: "h-3", content: "only on dst" })] }, thread("dst"));
  t.equal(((await graph.getState(thread("dst"))).values as { messages: BaseMessage[] }).messages.length, 6);
  t.equal(((await graph.getState(thread("src"))).values as { messages: BaseMessage[] }).messages.length, 4, "the source is untouched");

  // The pending writes of every checkpoint were copied too.
  const pending = async (id: string) => (await collect(opened.saver.list(thread(id)))).map((tuple: CheckpointTuple) => tuple.pendingWrites?.length ?? 0);
  t.same((await pending("dst")).slice(-6), await pending("src"));
});

t.test("putWrites: a retry appends nothing, special writes replace, copy of an unknown thread is empty", async (t) => {
  const dir = tempDir();
  const opened = await open(dir);
  cleanUp(t, dir, () => opened);
  const { saver, store } = opened;
  const checkpoint = {
    v: 4,
    id: "1ef00000-0000-6000-8000-000000000001",
    ts: new Date(0).toISOString(),
    channel_values: {},
    channel_versions: {},
    versions_seen: {},
  };
  const config = await saver.put(thread("w"), checkpoint, { source: "input", step: -1, parents: {} }, {});

  await saver.putWrites(
    config,
    [
      ["a", 1],
      ["constructor", 2],
    ],
    "task",
  );
  await saver.putWrites(
    config,
    [
      ["a", 1],
      ["constructor", 2],
    ],
    "task",
  );
  await saver.putWrites(config, [["__error__", "first"]], "task");
  await saver.putWrites(config, [["__error__", "second"]], "task");
  const types = (await store.readStream(checkpointStream("w"))).map((e) => e.type);
  t.same(types, ["CheckpointSaved", "PendingWritesSaved", "PendingWritesSaved", "PendingWritesSaved"], "the retry was not appended");
  t.same((await saver.getTuple(config))?.pendingWrites, [
    ["task", "__error__", "second"],
    ["task", "a", 1],
    ["task", "constructor", 2],
  ]);

  await saver.copyThread("nobody", "w-copy");
  t.equal(await saver.getTuple(thread("w-copy")), undefined);
  const emptyCopy = (await store.readStream(checkpointStream("w-copy"))).map((e) => e.data);
  t.equal(emptyCopy.length, 1, "only the marker");
  t.match(emptyCopy[0], { thread_id: "w-copy", from_thread_id: "nobody", checkpoints: 0, events: 0, source_revision: "-1" });
  await t.rejects(saver.copyThread("w", "w"), /same/);
});

/** A store whose appends commit at once but are acknowledged only when `release` is called (or fail when `fail` is). */
function heldAcknowledgements(store: EventStore, kind: EventStore["kind"]) {
  const held: { release(): void; fail(error: Error): void }[] = [];
  const wrapped: EventStore = {
    ...store,
    kind,
    append(stream, events, expected, options) {
      const committed = store.append(stream, events, expected, options);
      return new Promise((resolve, reject) => held.push({ release: () => void committed.then(resolve, reject), fail: reject }));
    },
  };
  return { store: wrapped, held };
}

const checkpointAt = (n: number) => ({
  v: 4,
  id: `1ef00000-0000-6000-8000-00000000000${n}`,
  ts: new Date(n).toISOString(),
  channel_values: { n },
  channel_versions: { n: n },
  versions_seen: {},
});

/** A saver over a fresh SQLite log whose acknowledgements the test releases (as a store of `kind` would order them). */
async function saverOnHeldStore(t: Parameters<typeof cleanUp>[0], kind: EventStore["kind"]) {
  const dir = tempDir();
  const opened = await open(dir);
  cleanUp(t, dir, () => opened);
  const { store, held } = heldAcknowledgements(opened.store, kind);
  return { opened, held, saver: new EventSourcedCheckpointSaver({ store }) };
}

t.test("a run's deferred writes: put returns before the commit, reads wait for it, flush reports a refused one", async (t) => {
  const { opened, held, saver } = await saverOnHeldStore(t, "sqlite");
  const deferred = (id: string): RunnableConfig => ({ configurable: { thread_id: id, [DEFER_CHECKPOINT_WRITES]: true } });

  const first = await saver.put(deferred("d"), checkpointAt(1), { source: "input", step: -1, parents: {} }, { n: 1 });
  t.equal(held.length, 1, "put returned while its append was still unacknowledged");
  const second = await saver.put(
    { configurable: { ...first.configurable, [DEFER_CHECKPOINT_WRITES]: true } },
    checkpointAt(2),
    { source: "loop", step: 0, parents: {} },
    { n: 2 },
  );
  t.equal(held.length, 2, "the next put did not wait for the first commit either");
  let read = false;
  const reading = saver.getTuple(thread("d")).then((tuple) => ((read = true), tuple));
  await new Promise((resolve) => setImmediate(resolve));
  t.notOk(read, "a read waits for the thread's deferred writes");
  for (const h of held.splice(0)) h.release();
  t.equal((await reading)?.checkpoint.id, second.configurable?.checkpoint_id, "then it sees the latest");
  t.same(
    (await opened.store.readStream(checkpointStream("d"))).map((e) => (e.data as { checkpoint_id: string }).checkpoint_id),
    [checkpointAt(1).id, checkpointAt(2).id],
    "in put order",
  );
  await saver.flush("d");

  await saver.put(deferred("e"), checkpointAt(3), { source: "input", step: -1, parents: {} }, {});
  held.splice(0)[0].fail(new Error("the log refused it"));
  await t.rejects(saver.flush("e"), /the log refused it/, "the failure reaches the run's flush");
  await t.resolves(saver.flush("e"), "reported once: the next flush succeeds");

  // Without the key (durability "sync", state updates), put waits for its commit as before.
  let returned = false;
  const waiting = saver.put(thread("s"), checkpointAt(4), { source: "update", step: 0, parents: {} }, {}).then(() => (returned = true));
  await new Promise((resolve) => setImmediate(resolve));
  t.notOk(returned, "a put without the key waits for its commit");
  held.splice(0)[0].release();
  await waiting;
});

t.test("over a store whose appends may commit out of call order, a thread's deferred writes go one after the other", async (t) => {
  const { opened, held, saver } = await saverOnHeldStore(t, "esdb");
  const config = { configurable: { thread_id: "o", [DEFER_CHECKPOINT_WRITES]: true } };
  await saver.put(config, checkpointAt(1), { source: "input", step: -1, parents: {} }, {});
  await saver.put(config, checkpointAt(2), { source: "loop", step: 0, parents: {} }, {});
  t.equal(held.length, 1, "the second append is not issued before the first is acknowledged");
  held.shift()!.release();
  while (held.length === 0) await new Promise((resolve) => setImmediate(resolve));
  held.shift()!.release();
  await saver.flush("o");
  t.same(
    (await opened.store.readStream(checkpointStream("o"))).map((e) => (e.data as { checkpoint_id: string }).checkpoint_id),
    [checkpointAt(1).id, checkpointAt(2).id],
  );
});
