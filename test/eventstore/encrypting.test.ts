import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import t, { type Test } from "tap";
import { openSealer, KeyDestroyedError, UnreadableEnvelopeError, type Sealer } from "../../src/crypto/sealer.js";
import { parseMasterKeys } from "../../src/crypto/master-keys.js";
import { openSqliteStore } from "../../src/eventstore/sqlite.js";
import { withEncryption, SEALED_FIELD, type ContentPolicy } from "../../src/eventstore/encrypting.js";
import { withSchemas } from "../../src/eventstore/validating.js";
import {
  AppendTicket,
  AppendTooLargeError,
  InvalidEventError,
  PURGED_EVENT_TYPE,
  type EventStore,
  type RecordedEvent,
  type Subscription,
} from "../../src/eventstore/types.js";
import { CLEAR, EVENT_CONTENT, contentPolicy, splitContent } from "../../src/domain/content-fields.js";
import { schemaForEventType } from "../../src/domain/events.js";
import { getLargeJson, putLargeJson } from "../../src/eventstore/chunked-append.js";
import { dataTextOf } from "../../src/eventstore/data-text.js";
import { eventStoreContract } from "../contract/eventstore-contract.js";

/** Letters only, so JSON escaping leaves it as it is and a byte scan finds it. */
const marker = (name: string) => `${name}${randomUUID().replaceAll("-", "")}`;

interface Opened {
  inner: EventStore;
  store: EventStore;
  sealer: Sealer;
  dir: string;
}

/** A store and its sealer in a new directory, or in `dir` again (as a restart opens them). */
async function open(t: Test, policy: ContentPolicy = contentPolicy(["secret"]), reopen?: string): Promise<Opened> {
  const dir = reopen ?? (await mkdtemp(path.join(os.tmpdir(), "encrypting-")));
  const inner = await openSqliteStore({ path: path.join(dir, "events.sqlite") });
  const sealer = openSealer({ vaultPath: path.join(dir, "keys.sqlite"), masterKeys: parseMasterKeys({ LANGGRAPH_AES_KEY: "k".repeat(32) })!, poolSize: 4 });
  // As the assembly wraps it: schema checks (of plaintext) outside, encryption next to the adapter.
  const store = withSchemas(withEncryption(inner, sealer, policy), schemaForEventType);
  t.teardown(async () => {
    await store.close();
    sealer.close();
    await rm(dir, { recursive: true, force: true });
  });
  return { inner, store, sealer, dir };
}

/** The envelope of a stream's event as the file holds it: its first (`at` 0), or its last (`at` -1). */
async function storedEnvelope(inner: EventStore, stream: string, at = 0): Promise<string> {
  return ((await inner.readStream(stream, { fromStorage: true })).at(at)!.data as Record<string, string>)[SEALED_FIELD];
}

/** A valid event of every content-bearing type, each with the marker `m` in every content field. */
function samples(m: string): Record<string, unknown> {
  const at = "2026-01-01T00:00:00.000Z";
  const run = {
    run_id: randomUUID(),
    thread_id: randomUUID(),
    assistant_id: randomUUID(),
    created_at: at,
    updated_at: at,
    status: "pending",
    metadata: { secret: m, visible: "kept" },
    multitask_strategy: "reject",
    kwargs: {
      input: { messages: [m] },
      config: { configurable: { m } },
      context: {},
      stream_mode: ["values"],
      temporary: false,
      subgraphs: false,
      resumable: false,
    },
  };
  const assistant = {
    graph_id: "agent",
    config: { configurable: { prompt: m } },
    context: { c: m },
    metadata: { secret: m, visible: "kept" },
    name: "a",
    description: null,
  };
  return {
    AssistantCreated: { assistant_id: randomUUID(), ...assistant, created_at: at },
    AssistantUpdated: { ...assistant, version: 2, updated_at: at },
    ThreadCreated: { thread_id: randomUUID(), metadata: { secret: m, visible: "kept" }, created_at: at, values: { messages: [m] } },
    ThreadUpdated: { metadata: { secret: m, visible: "kept" }, updated_at: at },
    ThreadStateUpdated: { values: { messages: [m] }, interrupts: { task: [{ value: m }] }, next: ["agent"], updated_at: at },
    RunEnqueued: { run, thread_metadata: { secret: m, visible: "kept" } },
    RunFinished: { run_id: run.run_id, status: "error", values: { m }, interrupts: { task: [m] }, error: { error: "Error", message: m }, finished_at: at },
    CheckpointSaved: {
      thread_id: "t",
      checkpoint_ns: "",
      checkpoint_id: "c1",
      parent_checkpoint_id: null,
      checkpoint: { v: 4, id: "c1", ts: at, channel_versions: { [m]: 1 }, versions_seen: {} },
      metadata: { writes: { agent: m } },
      blobs: [{ channel: "messages", version: 1, value: ["json", JSON.stringify([m]), "utf8"] }],
    },
    PendingWritesSaved: {
      thread_id: "t",
      checkpoint_ns: "",
      checkpoint_id: "c1",
      task_id: "task",
      task_path: "p",
      writes: [{ idx: 0, channel: "messages", value: ["json", m, "utf8"] }],
    },
    LargeJsonChunk: { sha256: "0".repeat(64), index: 0, count: 1, text: JSON.stringify({ m }) },
    RunOutput: { event: "values", data: { messages: [m] } },
    RunEnded: { status: "interrupted", values: { m }, interrupts: { task: [m] }, error: { error: "E", message: m }, ended_at: at },
    StoreItemPut: { namespace: ["ns"], key: "k", value: { m }, at, ttl_minutes: null, expires_at: null, vectors: [{ field: m, vector: [0.5] }] },
    CronCreated: {
      cron_id: randomUUID(),
      assistant_id: "agent",
      thread_id: null,
      schedule: "* * * * *",
      timezone: "UTC",
      end_time: null,
      enabled: true,
      on_run_completed: null,
      metadata: { secret: m, visible: "kept" },
      user_id: null,
      payload: { input: { m } },
      created_at: at,
    },
    CronUpdated: { payload: { input: { m } }, metadata: { secret: m }, updated_at: at },
    A2APushConfigSet: { task_id: "task", run_id: "run", protocol: "1.0", config: { id: "c", url: `https://example.com/${m}`, token: m }, set_at: at },
    A2APushRunEndCaughtUp: { task_id: "task", run_id: "run", config_id: "c", ended: { status: "success", values: { m }, ended_at: at } },
    IdempotencyKeyClaimed: { request_hash: m, run_id: "run", thread_id: "thread", claimed_at: at, expires_at: 0 },
    IdempotentRunCreated: { run },
  };
}

const contentTypes = Object.entries(EVENT_CONTENT)
  .filter(([, rule]) => rule !== CLEAR)
  .map(([type]) => type);

async function collect(subscription: Subscription, count: number): Promise<RecordedEvent[]> {
  const events: RecordedEvent[] = [];
  for await (const item of subscription) {
    if (item.kind === "event") events.push(item.event);
    if (events.length === count) break;
  }
  await subscription.close();
  return events;
}

t.test("every content-bearing type round-trips, sealed at rest, through reads and both subscriptions", async (t) => {
  const { inner, store } = await open(t);
  const m = marker("content");
  const data = samples(m);
  t.same(Object.keys(data).sort(), [...contentTypes].sort(), "a sample for every content-bearing type of the catalogue");
  const streams = contentTypes.map((type) => `enc${randomUUID().replaceAll("-", "")}-${type}`);
  for (const [i, type] of contentTypes.entries()) await store.append(streams[i], [{ type, data: data[type] }]);

  for (const [i, type] of contentTypes.entries()) {
    const [raw] = await inner.readStream(streams[i], { fromStorage: true });
    t.equal(raw.type, type, `${type}: the type stays clear`);
    t.type((raw.data as Record<string, unknown>)[SEALED_FIELD], "string", `${type}: sealed`);
    t.notOk(JSON.stringify(raw.data).includes(m), `${type}: no content in clear`);
    const clear = contentPolicy(["secret"]).clearPart(type, data[type]);
    t.equal(
      JSON.stringify(raw.data),
      JSON.stringify({ ...clear, [SEALED_FIELD]: (raw.data as Record<string, unknown>)[SEALED_FIELD] }),
      `${type}: the file holds the clear part, key for key, and the envelope last`,
    );
    const [read] = await store.readStream(streams[i]);
    t.same(read.data, data[type], `${type}: readStream gives the data back`);
    const [stored] = await store.readStream(streams[i], { fromStorage: true });
    t.equal(JSON.stringify(stored.data), JSON.stringify(data[type]), `${type}: opened from the file, key for key in the order appended`);
    const [live] = await collect(store.subscribeToStream(streams[i]), 1);
    t.same(live.data, data[type], `${type}: subscribeToStream gives the data back`);
  }
  const all = await store.readAll();
  const fromAll = await collect(store.subscribeToAll(), all.length);
  for (const [i, type] of contentTypes.entries()) {
    t.same(all.find((e) => e.streamId === streams[i])?.data, data[type], `${type}: readAll gives the data back`);
    t.same(fromAll.find((e) => e.streamId === streams[i])?.data, data[type], `${type}: subscribeToAll gives the data back`);
  }
});

t.test("the stored form's text is its clear part's with the envelope appended, whatever the clear part holds", async (t) => {
  // Clear parts a policy could give: none at all, keys in JSON's own order (an index first) with escapes, and one
  // that holds a field named as the envelope's (it keeps its place: the form is then serialised whole).
  const clearParts: Record<string, Record<string, unknown>> = {
    Empty: {},
    Ordered: { b: 'a "quoted" \\ line\n', 1: "index", skipped: undefined, nested: { z: [1, null] } },
    Named: { [SEALED_FIELD]: "the clear part's own", after: true },
  };
  const policy: ContentPolicy = {
    clearPart: (type) => clearParts[type],
    join: (clear, content) => ({ ...clear, content }),
  };
  // Types of no catalogue: the wrapper alone, without the schema checks.
  const { inner, sealer } = await open(t);
  const store = withEncryption(inner, sealer, policy);
  for (const [type, clear] of Object.entries(clearParts)) {
    const stream = `enc-${type}-${randomUUID()}`;
    const data = { ...clear, content: marker("c") };
    await store.append(stream, [{ type, data }]);
    const [raw] = await inner.readStream(stream, { fromStorage: true });
    const envelope = (raw.data as Record<string, unknown>)[SEALED_FIELD];
    t.type(envelope, "string", `${type}: sealed`);
    t.equal(JSON.stringify(raw.data), JSON.stringify({ ...clear, [SEALED_FIELD]: envelope }), `${type}: the file holds the stored form's JSON`);
    const [stored] = await store.readStream(stream, { fromStorage: true });
    t.same(stored.data, JSON.parse(JSON.stringify(data)), `${type}: opened from the file`);
  }
});

t.test("clear fields and unnamed metadata keys stay readable in the raw log; clear types are stored unchanged", async (t) => {
  const { inner, store } = await open(t);
  const m = marker("meta");
  const stream = `thread-${randomUUID()}`;
  const created = samples(m).ThreadCreated as Record<string, unknown>;
  const purged = { thread_id: randomUUID(), purged_at: "2026-01-01T00:00:00.000Z", purged_by: "alice", streams: 3 };
  await store.append(stream, [
    { type: "ThreadCreated", data: created },
    { type: "ThreadPurged", data: purged },
  ]);
  const [raw, rawPurged] = await inner.readStream(stream, { fromStorage: true });
  const clear = raw.data as Record<string, unknown>;
  t.equal(clear.thread_id, created.thread_id);
  t.equal(clear.created_at, created.created_at);
  t.same(clear.metadata, { visible: "kept" }, "only the named key left the metadata");
  t.notOk("values" in clear);
  t.same(rawPurged.data, purged, "a clear type is stored as it is");
});

t.test("what this process appended is held as given: its readers get it unsealed, from memory, with the data's text", async (t) => {
  const { inner, store } = await open(t);
  const stream = `run-${randomUUID()}`;
  const data = { event: "values", data: { n: 1 } };
  await store.append(stream, [{ type: "RunOutput", data }]);
  const [held] = await inner.readStream(stream);
  t.same(held.data, data, "the store's recent events hold the data as appended");
  const [read] = await store.readStream(stream);
  t.equal(read, held, "read through the encryption as it is held: no copy, nothing opened");
  t.equal(dataTextOf(read), JSON.stringify(data), "its text is at hand for readers that pass it on");
  const [stored] = await inner.readStream(stream, { fromStorage: true });
  t.type((stored.data as Record<string, unknown>)[SEALED_FIELD], "string", "the file has it sealed");
});

t.test("appends keep their options: tickets, dependencies, one turn", async (t) => {
  const { store } = await open(t);
  const first = new AppendTicket();
  const stream = `run-${randomUUID()}`;
  const a = store.append(stream, [{ type: "RunOutput", data: { event: "values", data: { n: 1 } } }], "no_stream", { ticket: first });
  const b = store.append(stream, [{ type: "RunOutput", data: { event: "values", data: { n: 2 } } }], 0n, { after: [first], urgent: true });
  await Promise.all([a, b]);
  t.equal(first.state, "written");
  t.same(
    (await store.readStream(stream)).map((e) => e.data),
    [
      { event: "values", data: { n: 1 } },
      { event: "values", data: { n: 2 } },
    ],
  );
});

t.test("an opened event is the same object for every reader of the same recorded event", async (t) => {
  const { inner, store } = await open(t);
  const stream = `run-${randomUUID()}`;
  await store.append(stream, [{ type: "RunOutput", data: { event: "values", data: { n: 1 } } }]);
  const [r1, r2] = [await inner.readStream(stream), await inner.readStream(stream)];
  const [o1, o2] = [await store.readStream(stream), await store.readStream(stream)];
  if (r1[0] === r2[0]) t.equal(o1[0], o2[0], "opened once");
  else t.same(o1[0].data, o2[0].data);
});

t.test("a destroyed data key reads as the store's tombstone, in reads and subscriptions", async (t) => {
  const first = await open(t);
  const m = marker("destroyed");
  const gone = `run-${randomUUID()}`;
  const kept = `run-${randomUUID()}`;
  await first.store.append(gone, [{ type: "RunOutput", data: { event: "values", data: { m } } }]);
  await first.store.append(kept, [{ type: "RunOutput", data: { event: "values", data: { m } } }]);
  await first.store.close();
  first.sealer.close();
  // Opened again, as after a restart: what it reads comes from the file (a purge also drops what the store holds).
  const { inner, store, sealer } = await open(t, undefined, first.dir);
  const [raw] = await inner.readStream(gone);
  sealer.destroy([sealer.keyIdOf((raw.data as Record<string, string>)[SEALED_FIELD])]);
  const [read] = await store.readStream(gone);
  t.equal(read.type, PURGED_EVENT_TYPE);
  t.same(read.data, { purged_type: "RunOutput" });
  t.equal(read.position, raw.position, "keeps its place");
  const [live] = await collect(store.subscribeToAll({ filter: { streamPrefixes: [gone] } }), 1);
  t.equal(live.type, PURGED_EVENT_TYPE, "subscribeToAll delivers the tombstone");
  t.same((await store.readStream(kept))[0].data, { event: "values", data: { m } }, "another stream's key is its own");
});

t.test("purgeStreams destroys the streams' data keys before the store purges them", async (t) => {
  const { inner, store, sealer } = await open(t);
  const m = marker("purged");
  const thread = randomUUID();
  const streams = [`thread-${thread}`, `checkpoints-${thread}`];
  await store.append(streams[0], [{ type: "ThreadCreated", data: samples(m).ThreadCreated }]);
  await store.append(streams[1], [{ type: "PendingWritesSaved", data: samples(m).PendingWritesSaved }]);
  const other = `thread-${randomUUID()}`;
  const otherData = samples(m).ThreadCreated;
  await store.append(other, [{ type: "ThreadCreated", data: otherData }]);
  const envelopes = await Promise.all(streams.map((s) => storedEnvelope(inner, s)));
  await store.purgeStreams(streams);
  for (const [i, envelope] of envelopes.entries()) {
    t.throws(() => sealer.open(streams[i], envelope), KeyDestroyedError, `${streams[i]}: its envelope no longer opens`);
    t.equal((await store.readStream(streams[i]))[0].type, PURGED_EVENT_TYPE);
  }
  t.same((await store.readStream(other))[0].data, otherData, "other streams stay");
});

t.test("a thread's checkpoints and the runs it enqueues seal with the thread's one data key; a thread purge shreds them all", async (t) => {
  const { inner, store, sealer } = await open(t);
  const m = marker("shared");
  const thread = randomUUID();
  const enqueued = samples(m).RunEnqueued as { run: { run_id: string } };
  const streams = { thread: `thread-${thread}`, checkpoints: `checkpoints-${thread}`, run: `run-${enqueued.run.run_id}` };
  const otherRun = `run-${randomUUID()}`;
  await store.append(streams.thread, [{ type: "RunEnqueued", data: enqueued }]);
  await store.append(streams.checkpoints, [{ type: "PendingWritesSaved", data: samples(m).PendingWritesSaved }]);
  await store.append(streams.run, [{ type: "RunOutput", data: samples(m).RunOutput }]);
  await store.append(otherRun, [{ type: "RunOutput", data: samples(m).RunOutput }]);
  const keyOf = async (stream: string, at = 0) => sealer.keyIdOf(await storedEnvelope(inner, stream, at));
  const threadKey = await keyOf(streams.thread);
  t.equal(await keyOf(streams.checkpoints), threadKey, "the checkpoints use the thread's key");
  t.equal(await keyOf(streams.run), threadKey, "so does the run it enqueued");
  t.not(await keyOf(otherRun), threadKey, "a run of no thread known here has a key of its own");
  // One key, but each envelope still opens only in its own stream.
  const runEnvelope = await storedEnvelope(inner, streams.run);
  t.throws(() => sealer.open(streams.thread, runEnvelope), UnreadableEnvelopeError);

  await store.purgeStreams(Object.values(streams));
  for (const stream of Object.values(streams)) t.equal((await store.readStream(stream))[0].type, PURGED_EVENT_TYPE, `${stream} is shredded`);
  t.equal((await store.readStream(otherRun))[0].type, "RunOutput", "another thread's run stays");
  // A thread id used again after its purge seals with a fresh key, and its streams share that one.
  await store.append(streams.thread, [{ type: "RunEnqueued", data: enqueued }]);
  await store.append(streams.run, [{ type: "RunOutput", data: samples(m).RunOutput }]);
  const rebornKey = await keyOf(streams.thread, -1);
  t.not(rebornKey, threadKey);
  t.equal(await keyOf(streams.run, -1), rebornKey);
});

t.test("an envelope that does not open (copied from another stream) is an InvalidEventError naming where it is", async (t) => {
  const { inner, store } = await open(t);
  const from = `run-${randomUUID()}`;
  const to = `run-${randomUUID()}`;
  await store.append(from, [{ type: "RunOutput", data: { event: "values", data: 1 } }]);
  const [raw] = await inner.readStream(from, { fromStorage: true });
  await inner.append(to, [{ type: "RunOutput", data: raw.data }]);
  await t.rejects(store.readStream(to), InvalidEventError);
  try {
    await store.readStream(to);
  } catch (error) {
    t.equal((error as InvalidEventError).stream, to);
    t.type((error as InvalidEventError).position, "bigint");
  }
});

t.test("an envelope of content parts (the format before the whole data was sealed) still opens, joined with its clear fields", async (t) => {
  const { inner, store, sealer } = await open(t);
  const stream = `thread-${randomUUID()}`;
  const data = samples(marker("legacy")).ThreadCreated as Record<string, unknown>;
  const split = splitContent("ThreadCreated", data, ["secret"])!;
  await inner.append(stream, [{ type: "ThreadCreated", data: { ...split.clear, [SEALED_FIELD]: sealer.seal(stream, JSON.stringify(split.content)) } }]);
  t.same((await store.readStream(stream))[0].data, data);
});

t.test("events written before encryption was turned on read as they are", async (t) => {
  const { inner, store } = await open(t);
  const stream = `run-${randomUUID()}`;
  await inner.append(stream, [{ type: "RunOutput", data: { event: "values", data: { plain: true } } }]);
  t.same((await store.readStream(stream))[0].data, { event: "values", data: { plain: true } });
});

t.test("the append limit counts sealed bytes: an append that fits in plaintext but not sealed is refused whole", async (t) => {
  const { inner, store } = await open(t);
  const stream = `run-${randomUUID()}`;
  const ticket = new AppendTicket();
  // Three quarters of a MiB of output: under the limit as plaintext, over it once sealed (base64url).
  const output = { event: "values", data: "x".repeat(800_000) };
  await t.rejects(store.append(stream, [{ type: "RunOutput", data: output }], "any", { ticket }), AppendTooLargeError);
  t.equal(ticket.state, "failed");
  t.same(await inner.readStream(stream), [], "nothing written");
  const fits = { event: "values", data: "x".repeat(700_000) };
  await store.append(stream, [{ type: "RunOutput", data: fits }]);
  t.same((await store.readStream(stream))[0].data, fits, "under three quarters of the limit fits");
});

// Sealing adds a third (base64url): the batch and chunk budgets of chunked-append.ts leave room for it.
t.test("a large value fits in the log once sealed", async (t) => {
  const { store } = await open(t);
  for (const [what, value] of [
    ["ASCII", "a".repeat(2_000_000)],
    ["CJK", "字".repeat(400_000)],
  ] as const) {
    const ref = await putLargeJson(store, "run-output-", randomUUID(), value);
    t.equal(await getLargeJson(store, ref), value, what);
  }
});

t.test("the store contract holds with every event's data sealed", async (t) => {
  // Seals whatever data the contract writes (its types are not the catalogue's), but for its test of the exact
  // size limit ("Big" events): the limit counts the sealed bytes, which the test below covers.
  const everything: ContentPolicy = {
    clearPart: (type) => (type === "Big" ? undefined : {}),
    join: (_clear, content) => content,
  };
  eventStoreContract(t, async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "encrypting-contract-"));
    const inner = await openSqliteStore({ path: path.join(dir, "events.sqlite") });
    const sealer = openSealer({ vaultPath: path.join(dir, "keys.sqlite"), masterKeys: parseMasterKeys({ LANGGRAPH_AES_KEY: "c".repeat(16) })!, poolSize: 4 });
    const store = withEncryption(inner, sealer, everything);
    let closed = false;
    return {
      store,
      async cleanup() {
        if (!closed) await store.close().catch(() => undefined);
        closed = true;
        sealer.close();
        await rm(dir, { recursive: true, force: true });
      },
    };
  });
});
