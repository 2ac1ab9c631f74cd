import { randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import t, { type Test } from "tap";
import { HumanMessage, type BaseMessage } from "@langchain/core/messages";
import type { RunnableConfig } from "@langchain/core/runnables";
import { openSqliteStore } from "../../src/eventstore/sqlite.js";
import { withSchemas } from "../../src/eventstore/validating.js";
import { schemaForEventType } from "../../src/domain/events.js";
import type { EventStore } from "../../src/eventstore/types.js";
import { openReadModels, type ReadModels } from "../../src/read-models/all.js";
import { EventSourcedCheckpointSaver } from "../../src/runtime/checkpointer.js";
import { CommandPipeline } from "../../src/commands/pipeline.js";
import type { AppContext } from "../../src/app/context.js";
import { createThread, deleteThread } from "../../src/app/threads.js";
import { CheckpointTtlSweeper, checkpointTtlSettings, type CheckpointTtlSettings } from "../../src/app/checkpoint-ttl-sweeper.js";
import { checkpointStream } from "../../src/domain/checkpoint-events.js";
import { threadStream } from "../../src/domain/threads.js";
import { LanggraphConfigError, loadLanggraphConfig, parseLanggraphConfig } from "../../src/langgraph-config.js";
import { isoOf } from "../../src/util/time.js";
import { FakeClock } from "../support/fake-clock.js";
import { startEsdbTestDouble } from "../support/esdb-test-double.js";
import { startTestServer, TEST_GRAPHS, type TestServer } from "../support/server.js";
import { chatGraph } from "../support/chat-graph.js";

const MINUTE = 60_000;
const TTL_MINUTES = 60;

interface Core {
  store: EventStore;
  readModels: ReadModels;
  clock: FakeClock;
  ctx: AppContext;
  /** A checkpointer of its own: another process's cache. */
  checkpointer(): EventSourcedCheckpointSaver;
  sweeper(settings: Partial<CheckpointTtlSettings>, checkpointer?: EventSourcedCheckpointSaver): CheckpointTtlSweeper;
}

/** A SQLite log, its read models and a fake clock that stamps the threads' events. */
async function core(t: Test): Promise<Core> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "checkpoint-ttl-"));
  const sqlite = await openSqliteStore({ path: path.join(dir, "events.sqlite"), synchronous: "NORMAL" });
  const store = withSchemas(sqlite, schemaForEventType);
  const readModels = openReadModels(dir);
  await readModels.runner.start(store);
  const clock = new FakeClock();
  const ctx = { store, readModels, commands: new CommandPipeline(store, readModels.runner), now: () => isoOf(clock.now()) } as unknown as AppContext;
  const sweepers: CheckpointTtlSweeper[] = [];
  t.teardown(async () => {
    for (const s of sweepers) await s.stop();
    await readModels.runner.close();
    await sqlite.close();
    await rm(dir, { recursive: true, force: true });
  });
  const checkpointer = () => new EventSourcedCheckpointSaver({ store });
  const own = checkpointer();
  return {
    store,
    readModels,
    clock,
    ctx,
    checkpointer,
    sweeper(settings, saver = own) {
      const sweeper = new CheckpointTtlSweeper({
        strategy: "delete",
        defaultTtl: TTL_MINUTES,
        sweepIntervalMinutes: 5,
        sweepLimit: 100,
        ...settings,
        ctx,
        checkpointer: async () => saver,
        clock,
      });
      sweepers.push(sweeper);
      return sweeper;
    },
  };
}

const config = (threadId: string): RunnableConfig => ({ configurable: { thread_id: threadId } });
const texts = (values: unknown) => ((values as { messages?: BaseMessage[] }).messages ?? []).map((m) => String(m.content));

/** A thread created now (by the fake clock) with two turns of the chat graph: four checkpoints or more. */
async function threadWithCheckpoints(c: Core, saver = c.checkpointer()): Promise<string> {
  const threadId = randomUUID();
  await createThread(c.ctx, { thread_id: threadId, metadata: {}, if_exists: "raise" });
  const graph = chatGraph(saver);
  await graph.invoke({ messages: [new HumanMessage({ id: "h-1", content: "hello" })] }, config(threadId));
  await graph.invoke({ messages: [new HumanMessage({ id: "h-2", content: "again" })] }, config(threadId));
  return threadId;
}

async function history(saver: EventSourcedCheckpointSaver, threadId: string): Promise<number> {
  let n = 0;
  for await (const _ of saver.list(config(threadId))) n++;
  return n;
}

async function eventTypes(store: EventStore, threadId: string): Promise<string[]> {
  return (await store.readStream(checkpointStream(threadId))).map((e) => e.type);
}

t.test("delete: a thread idle longer than default_ttl is deleted with its checkpoints; a fresh one is left", async (t) => {
  const c = await core(t);
  const saver = c.checkpointer();
  const old = await threadWithCheckpoints(c, saver);
  c.clock.set(c.clock.now() + 50 * MINUTE);
  const fresh = await threadWithCheckpoints(c, saver);
  const sweeper = c.sweeper({ strategy: "delete" }, saver);
  sweeper.start();
  await sweeper.sweep();
  t.equal(sweeper.stats.swept, 0, "nothing is older than default_ttl yet");
  t.equal(sweeper.nextSweep, c.clock.now() + 5 * MINUTE, "the next sweep is sweep_interval_minutes away");

  // 65 minutes after the first thread's activity: the timer's sweeps find it.
  await c.clock.advance(15 * MINUTE);
  t.equal(sweeper.stats.swept, 1, "one thread swept");
  t.equal(c.readModels.threads.load(old)?.deleted, true, "the thread is deleted");
  const graph = chatGraph(saver);
  t.same(texts((await graph.getState(config(old))).values), [], "its state is empty");
  t.equal(await saver.getTuple(config(old)), undefined, "no checkpoint");
  t.equal(await history(c.checkpointer(), old), 0, "another process reads no history either");
  t.same(texts((await graph.getState(config(fresh))).values), ["hello", "echo: hello", "again", "echo: again"], "the fresh thread is left");
  t.equal(c.readModels.threads.load(fresh)?.deleted, false);
  t.equal((await eventTypes(c.store, old)).filter((type) => type === "CheckpointsDeleted").length, 1);
  t.equal((await c.store.readStream(threadStream(old))).filter((e) => e.type === "ThreadDeleted").length, 1);

  // The second thread's turn comes 60 minutes after its own activity.
  await c.clock.advance(50 * MINUTE);
  t.equal(sweeper.stats.swept, 2, "the second thread swept");
  t.equal(await saver.getTuple(config(fresh)), undefined);
  t.equal((await eventTypes(c.store, old)).filter((type) => type === "CheckpointsDeleted").length, 1, "the first not swept again");
});

t.test("keep_latest: only the latest checkpoint stays, and the state is unchanged", async (t) => {
  const c = await core(t);
  const saver = c.checkpointer();
  const old = await threadWithCheckpoints(c, saver);
  const graph = chatGraph(saver);
  const before = await graph.getState(config(old));
  t.ok((await history(saver, old)) > 1, "a history to prune");
  const sweeper = c.sweeper({ strategy: "keep_latest" }, saver);
  c.clock.set(c.clock.now() + (TTL_MINUTES + 1) * MINUTE);
  await sweeper.sweep();
  t.equal(sweeper.stats.swept, 1);
  t.ok(sweeper.stats.discarded > 0, "older checkpoints discarded");
  t.equal(await history(saver, old), 1, "history has one checkpoint");
  t.equal(await history(c.checkpointer(), old), 1, "as another process reads it");
  const after = await graph.getState(config(old));
  t.same(texts(after.values), texts(before.values), "state unchanged");
  t.same(after.config, before.config, "the same latest checkpoint");
  await c.clock.advance(10 * MINUTE);
  t.equal(sweeper.stats.swept, 1, "a pruned thread is not pruned again");
  t.same(
    (await eventTypes(c.store, old)).filter((type) => type === "CheckpointsDiscarded"),
    ["CheckpointsDiscarded"],
  );
});

t.test("two sweepers (two processes' checkpointers) sweep a thread once", async (t) => {
  for (const strategy of ["delete", "keep_latest"] as const) {
    const c = await core(t);
    const threads = [await threadWithCheckpoints(c), await threadWithCheckpoints(c)];
    c.clock.set(c.clock.now() + (TTL_MINUTES + 1) * MINUTE);
    const a = c.sweeper({ strategy }, c.checkpointer());
    const b = c.sweeper({ strategy }, c.checkpointer());
    await Promise.all([a.sweep(), b.sweep()]);
    for (const id of threads) {
      const types = await eventTypes(c.store, id);
      if (strategy === "delete") {
        t.equal(types.filter((type) => type === "CheckpointsDeleted").length, 1, "one deletion of the checkpoints");
        t.equal((await c.store.readStream(threadStream(id))).filter((e) => e.type === "ThreadDeleted").length, 1, "one of the thread");
      } else {
        t.equal(types.filter((type) => type === "CheckpointsDiscarded").length, 1, "one prune");
        t.equal(await history(c.checkpointer(), id), 1);
      }
    }
    t.equal(a.stats.swept + b.stats.swept, 2, `${strategy}: each thread swept by one of them`);
    t.equal(a.stats.lost + b.stats.lost, 2, `${strategy}: the other lost its claim, or found the sweep done`);
  }
});

t.test("keep_latest: a sweep another process appended, not yet in this read model, is seen in the stream and left", async (t) => {
  const c = await core(t);
  const old = await threadWithCheckpoints(c);
  c.clock.set(c.clock.now() + (TTL_MINUTES + 1) * MINUTE);
  const row = c.readModels.checkpointTtl.due(c.clock.now() - TTL_MINUTES * MINUTE, 10);
  t.same(
    row.map((r) => r.thread_id),
    [old],
  );
  // Another process's sweep; this process's read model is held back by answering the row it had.
  const [tail] = await c.store.readStream(checkpointStream(old), { direction: "backwards", maxCount: 1 });
  t.ok(await c.checkpointer().keepLatestAt(old, tail!.revision));
  const readModels = { ...c.readModels, checkpointTtl: { ...c.readModels.checkpointTtl, due: () => row } } as unknown as ReadModels;
  const late = new CheckpointTtlSweeper({
    strategy: "keep_latest",
    defaultTtl: TTL_MINUTES,
    sweepIntervalMinutes: 5,
    sweepLimit: 10,
    ctx: { ...c.ctx, readModels },
    checkpointer: async () => c.checkpointer(),
    clock: c.clock,
  });
  await late.sweep();
  await late.stop();
  t.same({ swept: late.stats.swept, lost: late.stats.lost }, { swept: 0, lost: 1 }, "left, without a second claim");
  t.equal((await eventTypes(c.store, old)).filter((type) => type === "CheckpointsDiscarded").length, 1);
});

t.test("the read model: activity dates a thread, a sweep or a deletion takes it off", async (t) => {
  const c = await core(t);
  const id = randomUUID();
  await createThread(c.ctx, { thread_id: id, metadata: {}, if_exists: "raise" });
  const created = c.clock.now();
  t.equal(Number(c.readModels.checkpointTtl.unswept(id)?.active_at), created, "dated by its creation");
  t.same(c.readModels.checkpointTtl.due(created - 1, 10), [], "not due before");
  t.equal(c.readModels.checkpointTtl.oldestUnswept(), created);
  // A thread without checkpoints: the sweep marks it (a deletion of nothing), once.
  const sweeper = c.sweeper({ strategy: "keep_latest" });
  c.clock.set(created + (TTL_MINUTES + 1) * MINUTE);
  await sweeper.sweep();
  t.equal(sweeper.stats.swept, 1);
  t.equal(c.readModels.checkpointTtl.unswept(id), undefined, "swept");
  await sweeper.sweep();
  t.same(await eventTypes(c.store, id), ["CheckpointsDiscarded"], "marked once");

  const gone = randomUUID();
  await createThread(c.ctx, { thread_id: gone, metadata: {}, if_exists: "raise" });
  t.ok(c.readModels.checkpointTtl.unswept(gone));
  await deleteThread(c.ctx, gone);
  t.equal(c.readModels.checkpointTtl.unswept(gone), undefined, "a deleted thread leaves it");
});

t.test("sweep_limit bounds one sweep", async (t) => {
  const c = await core(t);
  for (let i = 0; i < 3; i++) await createThread(c.ctx, { thread_id: randomUUID(), metadata: {}, if_exists: "raise" });
  const sweeper = c.sweeper({ strategy: "delete", sweepLimit: 2 });
  c.clock.set(c.clock.now() + (TTL_MINUTES + 1) * MINUTE);
  await sweeper.sweep();
  t.equal(sweeper.stats.swept, 2, "two in the first sweep");
  await c.clock.advance(5 * MINUTE);
  t.equal(sweeper.stats.swept, 3, "the third in the next");
});

t.test("checkpointer.ttl in langgraph.json", async (t) => {
  const parsed = parseLanggraphConfig({ graphs: {}, checkpointer: { ttl: { default_ttl: 43200 } } });
  t.same(parsed.checkpointer?.ttl, { strategy: "delete", default_ttl: 43200, sweep_interval_minutes: 5, sweep_limit: 1000 }, "the official defaults");
  t.same(checkpointTtlSettings(parsed.checkpointer?.ttl), { strategy: "delete", defaultTtl: 43200, sweepIntervalMinutes: 5, sweepLimit: 1000 });
  const keep = parseLanggraphConfig({
    graphs: {},
    checkpointer: { ttl: { strategy: "keep_latest", default_ttl: 60, sweep_interval_minutes: 1, sweep_limit: 10 } },
  });
  t.equal(checkpointTtlSettings(keep.checkpointer?.ttl)?.strategy, "keep_latest");
  t.equal(
    checkpointTtlSettings(parseLanggraphConfig({ graphs: {}, checkpointer: { ttl: { strategy: "delete" } } }).checkpointer?.ttl),
    undefined,
    "no default_ttl: nothing expires",
  );
  t.equal(checkpointTtlSettings(parseLanggraphConfig({ graphs: {} }).checkpointer?.ttl), undefined);

  t.throws(
    () => parseLanggraphConfig({ graphs: {}, checkpointer: { ttl: { strategy: "archive", default_ttl: 60 } } }),
    new LanggraphConfigError('langgraph.json: checkpointer.ttl.strategy: expected "delete" or "keep_latest"'),
    "a bad strategy names the field",
  );
  t.throws(() => parseLanggraphConfig({ graphs: {}, checkpointer: { ttl: { default_ttl: -1 } } }), /checkpointer\.ttl\.default_ttl/);
  t.throws(() => parseLanggraphConfig({ graphs: {}, checkpointer: { ttl: { default_ttl: 1, sweep_limit: 1.5 } } }), /checkpointer\.ttl\.sweep_limit/);
  t.throws(
    () => parseLanggraphConfig({ graphs: {}, checkpointer: { ttl: { default_ttl: 1, sweep_interval_minutes: 0 } } }),
    /checkpointer\.ttl\.sweep_interval_minutes/,
  );

  // At start-up: the file is refused with one line naming the field.
  const dir = await mkdtemp(path.join(os.tmpdir(), "checkpoint-ttl-config-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const file = path.join(dir, "langgraph.json");
  await writeFile(file, JSON.stringify({ graphs: {}, checkpointer: { ttl: { strategy: "archive", default_ttl: 60 } } }));
  await t.rejects(loadLanggraphConfig(file, { applyEnv: false }), { name: "LanggraphConfigError", message: /^langgraph\.json: checkpointer\.ttl\.strategy: / });
});

for (const strategy of ["keep_latest", "delete"] as const) {
  t.test(`two servers on one EventStoreDB: checkpointer.ttl ${strategy} sweeps a thread once`, async (t) => {
    const esdb = await startEsdbTestDouble();
    t.teardown(() => esdb.close());
    const dir = await mkdtemp(path.join(os.tmpdir(), "checkpoint-ttl-esdb-"));
    t.teardown(() => rm(dir, { recursive: true, force: true }));
    const file = path.join(dir, "langgraph.json");
    const graphs = { agent: path.join(path.dirname(TEST_GRAPHS), "agent.ts:graph") };
    await writeFile(file, JSON.stringify({ graphs, checkpointer: { ttl: { strategy, default_ttl: TTL_MINUTES, sweep_interval_minutes: 5 } } }));
    const clock = new FakeClock(Date.now());
    const start = clock.now();
    const env = { EVENTSTORE_URL: esdb.connectionString, LANGGRAPH_JSON: file };
    const servers: TestServer[] = [];
    t.teardown(async () => {
      for (const s of servers) await s.close();
    });
    for (let i = 0; i < 2; i++) servers.push(await startTestServer({ env, deps: { clock } }));
    const [a, b] = servers;
    const thread = await a.client.threads.create();
    for (const content of ["one", "two"]) await a.client.runs.wait(thread.thread_id, "agent", { input: { messages: [{ role: "user", content }] } });
    const before = await b.client.threads.getState(thread.thread_id);
    t.ok((await b.client.threads.getHistory(thread.thread_id, { limit: 100 })).length > 1, "a history to sweep");
    for (const s of servers) await s.server.readModels.runner.waitFor(await a.server.store.headPosition());

    // Both servers' sweeps, an hour and more later (the API stamps threads by the system clock: a fresh thread is tested above).
    clock.set(start + (TTL_MINUTES + 10) * MINUTE);
    const deadline = Date.now() + 10_000;
    while (servers.some((s) => s.server.readModels.checkpointTtl.unswept(thread.thread_id) !== undefined) && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 50));
    // More sweeps find nothing left to do.
    clock.set(start + (TTL_MINUTES + 20) * MINUTE);
    await new Promise((resolve) => setTimeout(resolve, 200));

    const events = await a.server.store.readStream(checkpointStream(thread.thread_id));
    const threadEvents = await a.server.store.readStream(threadStream(thread.thread_id));
    if (strategy === "keep_latest") {
      t.equal(events.filter((e) => e.type === "CheckpointsDiscarded").length, 1, "pruned once");
      for (const s of servers) {
        t.equal((await s.client.threads.getHistory(thread.thread_id, { limit: 100 })).length, 1, "one checkpoint in the history");
        const after = await s.client.threads.getState(thread.thread_id);
        t.same(after.values, before.values, "the state is unchanged");
        t.equal(after.checkpoint.checkpoint_id, before.checkpoint.checkpoint_id, "the latest checkpoint kept");
      }
    } else {
      t.equal(threadEvents.filter((e) => e.type === "ThreadDeleted").length, 1, "the thread deleted once");
      t.equal(events.filter((e) => e.type === "CheckpointsDeleted").length, 1, "its checkpoints deleted once");
      for (const s of servers) t.equal((await fetch(`${s.url}/threads/${thread.thread_id}`)).status, 404, "gone on both servers");
    }
  });
}
