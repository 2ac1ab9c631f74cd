// Checkpoints that stay bounded: the 1 MiB append limit, writes split into several appends
// (idempotent, resumable), snapshots that make a cache miss read only the tail of a thread, and
// the byte bound of the cache. Through the real stores: a SQLite file and the ESDB test double.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import t, { type Test } from "tap";
import type { RunnableConfig } from "@langchain/core/runnables";
import type { Checkpoint, CheckpointTuple } from "@langchain/langgraph-checkpoint";
import { checkpointEventSchemas, checkpointStream } from "../../src/domain/checkpoint-events.js";
import { getLargeJson, putLargeJson, LARGE_JSON_CHUNK } from "../../src/eventstore/chunked-append.js";
import { openEsdbStore } from "../../src/eventstore/esdb.js";
import { openSqliteStore } from "../../src/eventstore/sqlite.js";
import { MAX_APPEND_SIZE, type EventData, type EventStore, type ReadStreamOptions } from "../../src/eventstore/types.js";
import { withSchemas } from "../../src/eventstore/validating.js";
import { EventSourcedCheckpointSaver } from "../../src/runtime/checkpointer.js";
import { startEsdbTestDouble } from "../support/esdb-test-double.js";

const schemas = (type: string) => (Object.hasOwn(checkpointEventSchemas, type) ? checkpointEventSchemas[type] : undefined);

/**
 * A store that counts what is read and written, and fails the appends a test asks it to (before
 * they reach the store: nothing of a failed append is written, as after a crash).
 */
interface Instrumented extends EventStore {
  eventsRead: number;
  appends: number;
  /** Called with each append; throwing fails it. */
  failAppend?: (stream: string, events: EventData[]) => void;
}

/** `failInStore`: the store itself calls `failAppend` (the ESDB double, over gRPC); else the wrapper does. */
function instrument(inner: EventStore, failInStore = false): Instrumented {
  const store: Instrumented = {
    kind: inner.kind,
    eventsRead: 0,
    appends: 0,
    async append(stream, events, expected) {
      if (!failInStore) store.failAppend?.(stream, events);
      const result = await inner.append(stream, events, expected);
      store.appends += 1;
      return result;
    },
    async readStream(stream: string, options?: ReadStreamOptions) {
      const events = await inner.readStream(stream, options);
      store.eventsRead += events.length;
      return events;
    },
    readAll: (options) => inner.readAll(options),
    whenDurable: () => inner.whenDurable(),
    headPosition: () => inner.headPosition(),
    subscribeToStream: (stream, options) => inner.subscribeToStream(stream, options),
    subscribeToAll: (options) => inner.subscribeToAll(options),
    purgeStreams: (streams) => inner.purgeStreams(streams),
    close: () => inner.close(),
  };
  return store;
}

type Kind = "sqlite" | "esdb";

async function openStore(t: Test, kind: Kind): Promise<Instrumented> {
  let inner: EventStore;
  // On ESDB the double fails the append on the server side (the client gets a gRPC error).
  const failures: { fail?: (stream: string) => void } = {};
  if (kind === "sqlite") {
    const dir = mkdtempSync(path.join(tmpdir(), "checkpoints-large-"));
    inner = await openSqliteStore({ path: path.join(dir, "events.sqlite") });
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  } else {
    const double = await startEsdbTestDouble({ beforeAppend: (stream) => failures.fail?.(stream) });
    inner = await openEsdbStore({ connectionString: double.connectionString });
    t.teardown(() => double.close());
  }
  const store = instrument(withSchemas(inner, schemas), kind === "esdb");
  failures.fail = (stream) => store.failAppend?.(stream, []);
  t.teardown(() => store.close());
  return store;
}

const thread = (id: string): RunnableConfig => ({ configurable: { thread_id: id, checkpoint_ns: "" } });
const checkpointId = (n: number) => `1ef00000-0000-6000-8000-${n.toString().padStart(12, "0")}`;

/** A value of about `bytes` bytes that does not compress to nothing: distinct per `seed`. */
function payload(seed: number, bytes: number): string {
  let out = "";
  let x = seed * 2654435761 + 1;
  while (out.length < bytes) {
    x = (x * 1103515245 + 12345) % 2147483648;
    out += x.toString(36);
  }
  return out.slice(0, bytes);
}

/** Puts `count` checkpoints, each with a new version of channel `big` holding `valueBytes`. */
async function longThread(saver: EventSourcedCheckpointSaver, threadId: string, count: number, valueBytes: number): Promise<void> {
  let parent: string | undefined;
  for (let n = 1; n <= count; n++) {
    const checkpoint: Checkpoint = {
      v: 4,
      id: checkpointId(n),
      ts: new Date(n).toISOString(),
      channel_values: { big: payload(n, valueBytes), small: n },
      channel_versions: { big: n, small: n },
      versions_seen: {},
    };
    const config = { configurable: { thread_id: threadId, checkpoint_ns: "", ...(parent ? { checkpoint_id: parent } : {}) } };
    const saved = await saver.put(config, checkpoint, { source: "loop", step: n, parents: {} }, { big: n, small: n });
    await saver.putWrites(saved, [["small", n]], `task-${n}`);
    parent = checkpoint.id;
  }
}

async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

/** A tuple without its thread id (to compare a copy with its source). */
function comparable(tuple: CheckpointTuple | undefined) {
  if (!tuple) return tuple;
  return {
    id: tuple.checkpoint.id,
    values: tuple.checkpoint.channel_values,
    parent: tuple.parentConfig?.configurable?.checkpoint_id,
    writes: tuple.pendingWrites,
    step: tuple.metadata?.step,
  };
}

for (const kind of ["sqlite", "esdb"] as const) {
  t.test(`${kind}: putLargeJson / getLargeJson`, async (t) => {
    const store = await openStore(t, kind);
    const value = { text: payload(1, 3 * 1024 * 1024), unicode: "ünïcødé 🚀 ".repeat(50_000), list: [1, null, true] };
    const ref = await putLargeJson(store, "large-test-", "a", value);
    t.ok(ref.chunks >= 4, `split into ${ref.chunks} chunks`);
    t.same(await getLargeJson(store, ref), value, "reassembled exactly");
    const written = (await store.readStream(ref.stream)).length;
    t.same(await putLargeJson(store, "large-test-", "a", value), ref, "putting it again gives the same ref");
    t.equal((await store.readStream(ref.stream)).length, written, "and writes nothing");

    // A crash after the second chunk: the retry writes only what is missing.
    let appends = 0;
    store.failAppend = () => {
      if (++appends === 3) throw new Error("crash");
    };
    const other = { text: payload(2, 3 * 1024 * 1024) };
    await t.rejects(putLargeJson(store, "large-test-", "b", other));
    const before = (await store.readStream("large-test-b")).length;
    t.ok(before > 0, `${before} chunks were written before the crash (two appends)`);
    store.failAppend = undefined;
    const otherRef = await putLargeJson(store, "large-test-", "b", other);
    t.ok(before < otherRef.chunks, "not all of them");
    t.equal((await store.readStream("large-test-b")).length, otherRef.chunks, "the retry completed it without duplicates");
    t.same(await getLargeJson(store, otherRef), other);
  });

  t.test(`${kind}: a checkpoint value over 1 MiB is stored apart; every append stays under the limit`, async (t) => {
    const store = await openStore(t, kind);
    const saver = new EventSourcedCheckpointSaver({ store });
    await longThread(saver, "big", 2, 2 * 1024 * 1024);
    const tuple = await saver.getTuple(thread("big"));
    t.equal((tuple?.checkpoint.channel_values.big as string).length, 2 * 1024 * 1024, "the 2 MiB value reads back");
    t.equal(tuple?.checkpoint.channel_values.big, payload(2, 2 * 1024 * 1024));
    const events = await store.readStream(checkpointStream("big"));
    const largest = Math.max(...events.map((e) => JSON.stringify(e.data).length));
    t.ok(largest < 64 * 1024, `the checkpoint events hold refs (largest ${largest} bytes)`);
    const fresh = new EventSourcedCheckpointSaver({ store });
    const readBefore = store.eventsRead;
    t.same(comparable(await fresh.getTuple(thread("big"))), comparable(tuple), "a fresh saver reads the same from the log");
    t.ok(store.eventsRead > readBefore, "the fresh saver read the value's chunks");
    // The saver that wrote it reads it back without the log: the text is held by its hash.
    const warmBefore = store.eventsRead;
    t.equal((await saver.getTuple(thread("big")))?.checkpoint.channel_values.big, payload(2, 2 * 1024 * 1024));
    t.equal(store.eventsRead, warmBefore, "read back from memory, not from the log");

    // A pending write over the limit too, with small ones beside it.
    const huge = payload(9, 1536 * 1024);
    await saver.putWrites(
      tuple!.config,
      [
        ["big", huge],
        ["small", 1],
      ],
      "task-huge",
    );
    const writes = (await new EventSourcedCheckpointSaver({ store }).getTuple(thread("big")))?.pendingWrites ?? [];
    t.same(
      writes.filter(([task]) => task === "task-huge"),
      [
        ["task-huge", "big", huge],
        ["task-huge", "small", 1],
      ],
      "the pending write reads back",
    );
  });

  t.test(`${kind}: copyThread of a thread of several MiB, and a crash in the middle then a retry`, async (t) => {
    const store = await openStore(t, kind);
    const saver = new EventSourcedCheckpointSaver({ store, snapshotEvery: 1000 });
    // 60 checkpoints with a 100 KiB value each (under LARGE_CHECKPOINT_VALUE_BYTES once serialized): inline in their events, ~6 MiB in all.
    await longThread(saver, "src", 60, 100 * 1024);
    const source = (await collect(saver.list(thread("src")))).map(comparable);
    t.equal(source.length, 60);
    const sourceBytes = (await store.readStream(checkpointStream("src"))).reduce((n, e) => n + JSON.stringify(e.data).length, 0);
    t.ok(sourceBytes > 5 * MAX_APPEND_SIZE, `the source holds ${(sourceBytes / 1048576).toFixed(1)} MiB`);

    const before = store.appends;
    await saver.copyThread("src", "dst");
    t.ok(store.appends - before >= 6, `copied in ${store.appends - before} appends`);
    t.same((await collect(saver.list(thread("dst")))).map(comparable), source, "the copy has the same history");
    t.same(comparable(await new EventSourcedCheckpointSaver({ store }).getTuple(thread("dst"))), source[0], "a fresh saver reads the copy's latest");

    // Crash: the third append of the copy fails (nothing of it written), after two went through.
    let copyAppends = 0;
    store.failAppend = (stream) => {
      if (stream === checkpointStream("dst2") && ++copyAppends === 3) throw new Error("crash in the middle of the copy");
    };
    await t.rejects(saver.copyThread("src", "dst2"));
    const partial = (await store.readStream(checkpointStream("dst2"))).filter((e) => e.type === "CheckpointSaved").length;
    t.ok(partial > 0 && partial < 60, `the crash left a partial copy (${partial} checkpoints)`);
    store.failAppend = undefined;
    await saver.copyThread("src", "dst2");
    const events = await store.readStream(checkpointStream("dst2"));
    t.equal(events.filter((e) => e.type === "CheckpointsCopied").length, 1, "one copy operation");
    t.equal(events.filter((e) => e.type === "CheckpointSaved").length, 60, "exactly one copy of each checkpoint");
    t.equal(new Set(events.map((e) => e.id)).size, events.length, "no event twice");
    t.same((await collect(new EventSourcedCheckpointSaver({ store }).list(thread("dst2")))).map(comparable), source, "the retried copy is whole");

    // Running the finished copy again changes nothing.
    const length = events.length;
    await saver.copyThread("src", "dst2");
    t.equal((await store.readStream(checkpointStream("dst2"))).length, length, "a retry of a finished copy appends nothing");
  });

  t.test(`${kind}: a cache miss on a long thread reads only the tail`, async (t) => {
    const store = await openStore(t, kind);
    const writer = new EventSourcedCheckpointSaver({ store, snapshotEvery: 100 });
    await longThread(writer, "long", 530, 64);
    const total = (await store.readStream(checkpointStream("long"))).length;
    const latest = await writer.getTuple(thread("long"));

    const reader = new EventSourcedCheckpointSaver({ store });
    store.eventsRead = 0;
    const missed = await reader.getTuple(thread("long"));
    t.same(comparable(missed), comparable(latest), "the miss gives the latest checkpoint");
    t.ok(store.eventsRead < 150, `the miss read ${store.eventsRead} events of ${total}`);
    t.ok(reader.cache.held("long")?.state?.partial, "the held state was folded from a snapshot");

    // What the snapshot does not hold is read from the whole stream, with the same answer.
    const old = await reader.getTuple({ configurable: { ...thread("long").configurable, checkpoint_id: checkpointId(7) } });
    t.equal(old?.checkpoint.channel_values.big, payload(7, 64), "an old checkpoint reads from the history");
    t.equal((await collect(reader.list(thread("long")))).length, 530, "list() reads the whole history");
    t.same(
      (await collect(reader.list(thread("long"), { limit: 3 }))).map(comparable),
      (await collect(writer.list(thread("long"), { limit: 3 }))).map(comparable),
    );

    // A rollback past the snapshot: the latest is right again, and the next miss stays cheap.
    t.equal(await reader.discardAfter("long", checkpointId(490)), 40);
    t.equal((await reader.getTuple(thread("long")))?.checkpoint.id, checkpointId(490), "the rolled-back latest");
    const third = new EventSourcedCheckpointSaver({ store });
    store.eventsRead = 0;
    t.equal((await third.getTuple(thread("long")))?.checkpoint.id, checkpointId(490), "a fresh saver agrees");
    t.ok(store.eventsRead < 20, `after the rollback a miss read ${store.eventsRead} events`);
    t.equal(await third.latestCheckpointId("long"), checkpointId(490));
  });
}

t.test("the cache is bounded in bytes: the least recently used threads are evicted", async (t) => {
  const store = await openStore(t, "sqlite");
  const writer = new EventSourcedCheckpointSaver({ store });
  for (let i = 0; i < 6; i++) await longThread(writer, `b-${i}`, 5, 20 * 1024);
  const maxBytes = 300 * 1024;
  const saver = new EventSourcedCheckpointSaver({ store, cacheBytes: maxBytes });
  for (let i = 0; i < 6; i++) await saver.getTuple(thread(`b-${i}`));
  t.ok(saver.cache.bytes <= maxBytes, `held ${saver.cache.bytes} bytes of at most ${maxBytes}`);
  t.ok(saver.cache.bytes > 100 * 1024, "and it does hold threads");
  t.ok(saver.cache.size < 6, `${saver.cache.size} of 6 threads held`);
  t.ok(saver.cache.has("b-5"), "the most recently used is held");
  t.notOk(saver.cache.has("b-0"), "the least recently used was evicted");
  t.equal((await saver.getTuple(thread("b-0")))?.checkpoint.id, checkpointId(5), "an evicted thread reads back");

  const tiny = new EventSourcedCheckpointSaver({ store, cacheBytes: 1024 });
  t.equal((await tiny.getTuple(thread("b-1")))?.checkpoint.id, checkpointId(5), "a thread larger than the bound is served");
  t.equal(tiny.cache.size, 0, "but not kept");
  t.equal(tiny.cache.bytes, 0);
});

t.test("CHECKPOINT_CACHE_BYTES configures the byte bound", async (t) => {
  const { loadConfig, ConfigError } = await import("../../src/config.js");
  t.equal(loadConfig({}).checkpointCacheBytes, 32 * 1024 * 1024);
  t.equal(loadConfig({ CHECKPOINT_CACHE_BYTES: "1048576" }).checkpointCacheBytes, 1048576);
  t.throws(() => loadConfig({ CHECKPOINT_CACHE_BYTES: "0" }), ConfigError);
});

t.test("chunk events are in the catalogue", async (t) => {
  t.ok(schemas(LARGE_JSON_CHUNK), "LargeJsonChunk validates");
});
