/**
 * The EventStoreDB adapter: the shared contract suite against the in-process gRPC TEST DOUBLE of EventStoreDB
 * (every run, in two server flavours), against a real EventStoreDB when EVENTSTORE_URL is set, and a few
 * adapter-specific checks (connection failures, the expected-revision mapping, system events, positions).
 */
import { randomUUID } from "node:crypto";
import net from "node:net";
import t from "tap";
import { openEsdbStore } from "../../src/eventstore/esdb.js";
import { fromClientPosition, redactConnectionString, toAppendOptions, toClientPosition, toCurrentRevision } from "../../src/eventstore/esdb-mapping.js";
import { StoreUnavailableError, WrongExpectedVersionError, type EventStore, type SubscriptionItem } from "../../src/eventstore/types.js";
import { eventStoreContract } from "../contract/eventstore-contract.js";
import { LogHealth } from "../../src/eventstore/log-health.js";
import { startEsdbTestDouble, type EsdbTestDoubleOptions } from "../support/esdb-test-double.js";

async function onDouble(options?: EsdbTestDoubleOptions) {
  const double = await startEsdbTestDouble(options);
  const store = await openEsdbStore({ connectionString: double.connectionString });
  return {
    double,
    store,
    scavenge: () => void double.scavenge(),
    async cleanup() {
      await store.close();
      await double.close();
    },
  };
}

t.test("contract: test double of a current server (BatchAppend, CaughtUp messages)", async (t) => {
  eventStoreContract(t, () => onDouble());
});

t.test("contract: test double of an older server (Append only, no CaughtUp messages)", async (t) => {
  eventStoreContract(t, () => onDouble({ batchAppend: false, caughtUpMessages: false }));
});

const realUrl = process.env.EVENTSTORE_URL;
t.test(
  "contract: real EventStoreDB",
  { skip: realUrl ? false : "EVENTSTORE_URL is not set (e.g. esdb://127.0.0.1:2113?tls=false): no real EventStoreDB to test against" },
  async (t) => {
    eventStoreContract(t, async () => {
      const store = await openEsdbStore({ connectionString: realUrl! });
      return { store, cleanup: () => store.close() };
    });
  },
);

// ------------------------------------------------------------------------------------------ adapter specifics

/** A 127.0.0.1 port with nothing listening on it. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

t.test("a server that cannot be reached: StoreUnavailableError with a one-line message", async (t) => {
  const port = await closedPort();
  const connectionString = `esdb://127.0.0.1:${port}?tls=false`;
  await t.rejects(openEsdbStore({ connectionString }), StoreUnavailableError);
  try {
    await openEsdbStore({ connectionString });
  } catch (error) {
    const message = (error as Error).message;
    t.match(message, `cannot reach EventStoreDB at ${connectionString}: `, "names the server");
    t.notMatch(message, /\n/, "one line");
    t.equal((error as StoreUnavailableError).code, "STORE_UNAVAILABLE");
  }
});

t.test("an invalid connection string: StoreUnavailableError, password hidden", async (t) => {
  await t.rejects(openEsdbStore({ connectionString: "http://admin:secret@127.0.0.1:1" }), StoreUnavailableError);
  try {
    await openEsdbStore({ connectionString: "http://admin:secret@127.0.0.1:1" });
  } catch (error) {
    t.notMatch((error as Error).message, "secret", "no password in the message");
  }
  t.equal(redactConnectionString("esdb://admin:changeit@127.0.0.1:2113?tls=false"), "esdb://admin:***@127.0.0.1:2113?tls=false");
});

t.test("the server going away: operations fail with StoreUnavailableError within the deadline, subscriptions wait to re-subscribe", async (t) => {
  const double = await startEsdbTestDouble();
  const health = new LogHealth();
  const store = await openEsdbStore({ connectionString: double.connectionString, health, deadlineMs: 1_500 });
  t.teardown(() => store.close());
  await store.append(`gone-${randomUUID()}`, [{ type: "E", data: {} }]);
  const sub = store.subscribeToAll({ name: "probe" });
  const it = sub[Symbol.asyncIterator]();
  t.equal((await it.next()).value?.kind, "event", "history");
  t.equal((await it.next()).value?.kind, "caughtUp", "live");
  const pending = it.next();
  await double.close();
  const started = Date.now();
  await t.rejects(store.readStream("anything"), StoreUnavailableError, "reads fail");
  await t.rejects(store.append("anything", [{ type: "E", data: {} }]), StoreUnavailableError, "appends fail");
  t.ok(Date.now() - started < 2 * 1_500 + 1_000, "each within its deadline");
  t.equal(health.state, "disconnected", "health says the log is unreachable");
  t.match(health.snapshot().subscriptions, [{ name: "probe", state: "reconnecting" }], "the subscription is reconnecting, not dead");
  t.equal(health.verdict().ok, false);
  await sub.close();
  t.same(await pending, { done: true, value: undefined }, "closing ends the waiting subscription cleanly");
});

t.test("the expected-revision mapping (one function) and its inverse", async (t) => {
  t.same(toAppendOptions("any"), { expectedRevision: "any" });
  t.same(toAppendOptions("no_stream"), { expectedRevision: "no_stream" });
  t.same(toAppendOptions("stream_exists"), { expectedRevision: "stream_exists" });
  t.same(toAppendOptions(41n), { expectedRevision: 41n });
  t.same(Object.keys(toAppendOptions(0n)), ["expectedRevision"], "6.x option name (the kurrent client calls it streamState)");
  t.equal(toCurrentRevision("no_stream"), "no_stream");
  t.equal(toCurrentRevision(-1n), "no_stream", "old servers report a missing stream as -1");
  t.equal(toCurrentRevision(3n), 3n);
});

t.test("positions: commit position as bigint, round-tripping to { commit, prepare }", async (t) => {
  t.same(toClientPosition(1234n), { commit: 1234n, prepare: 1234n });
  t.equal(fromClientPosition({ commit: 1234n, prepare: 1234n }), 1234n);
  t.equal(fromClientPosition({ commit: (1n << 64n) - 1n, prepare: (1n << 64n) - 1n }), undefined, "no position (-1 on the wire)");
  t.equal(fromClientPosition(undefined), undefined);

  const { store, cleanup } = await onDouble();
  t.teardown(cleanup);
  const s = `pos-${randomUUID()}`;
  const results = [];
  for (let i = 0; i < 5; i++) results.push(await store.append(s, [{ type: "E", data: { i } }]));
  const third = results[2].position;
  t.same(
    (await store.readAll({ fromPosition: third, filter: { streamPrefixes: [s] } })).map((e) => e.revision),
    [2n, 3n, 4n],
    "readAll from a position starts at that event",
  );
  const sub = store.subscribeToAll({ fromPosition: third, filter: { streamPrefixes: [s] } });
  const it = sub[Symbol.asyncIterator]();
  const first = await it.next();
  t.equal(first.value?.kind === "event" && first.value.event.revision, 3n, "subscribeToAll from a position starts after it");
  await sub.close();
});

t.test("StreamNotFound reads as empty; WrongExpectedVersion carries stream, expected, actual", async (t) => {
  const { store, cleanup } = await onDouble();
  t.teardown(cleanup);
  const s = `missing-${randomUUID()}`;
  t.same(await store.readStream(s), []);
  t.same(await store.readStream(s, { direction: "backwards", fromRevision: 5n }), []);
  await store.append(s, [{ type: "E", data: {} }]);
  const error = await store.append(s, [{ type: "E", data: {} }], "no_stream").catch((e: unknown) => e);
  t.ok(error instanceof WrongExpectedVersionError);
  t.same(
    {
      stream: (error as WrongExpectedVersionError).stream,
      expected: (error as WrongExpectedVersionError).expected,
      actual: (error as WrongExpectedVersionError).actual,
    },
    { stream: s, expected: "no_stream", actual: 0n },
  );
});

t.test("system streams and events never appear in our $all", async (t) => {
  for (const flavour of [{}, { batchAppend: false, caughtUpMessages: false }] as EsdbTestDoubleOptions[]) {
    const { store, cleanup } = await onDouble(flavour);
    t.teardown(cleanup);
    t.equal(await store.headPosition(), -1n, "a fresh server holds only system events: head is -1");
    t.same(await store.readAll(), [], "and $all reads as empty");

    const user = await store.append("users-1", [{ type: "Created", data: {} }]);
    await store.append("$system-1", [{ type: "Something", data: {} }]);
    await store.append("users-1", [{ type: "$internal", data: {} }]);
    t.equal(await store.headPosition(), user.position, "head skips trailing system events");
    t.same(
      (await store.readAll()).map((e) => e.streamId + "/" + e.type),
      ["users-1/Created"],
      "readAll skips them",
    );
    t.equal((await store.readStream("$system-1")).length, 1, "a system stream can still be read by name");

    const sub = store.subscribeToAll();
    const it = sub[Symbol.asyncIterator]();
    const seen: SubscriptionItem[] = [];
    for (;;) {
      const item = (await it.next()).value as SubscriptionItem;
      seen.push(item);
      if (item.kind === "caughtUp") break;
    }
    await store.append("$system-2", [{ type: "Other", data: {} }]);
    await store.append("users-1", [{ type: "$internal2", data: {} }]);
    await store.append("users-2", [{ type: "Created", data: {} }]);
    seen.push((await it.next()).value as SubscriptionItem);
    t.same(
      seen.map((i) => (i.kind === "event" ? `${i.event.streamId}/${i.event.type}` : i.kind)),
      ["users-1/Created", "caughtUp", "users-2/Created"],
      "subscribeToAll skips them, in history and live",
    );
    await sub.close();
  }
});

t.test("store.close() waits for in-flight appends, then refuses new work", async (t) => {
  const { store, double } = await onDouble();
  t.teardown(() => double.close());
  const s = `closing-${randomUUID()}`;
  const appends = Array.from({ length: 20 }, (_, i) => store.append(s, [{ type: "E", data: { i } }]));
  await store.close();
  const results = await Promise.allSettled(appends);
  t.ok(
    results.every((r) => r.status === "fulfilled"),
    "every append issued before close() completed",
  );
  await t.rejects(store.readStream(s), StoreUnavailableError, "reads after close are refused");
  const again: EventStore = await openEsdbStore({ connectionString: double.connectionString });
  t.equal((await again.readStream(s)).length, 20, "all 20 events are in the log");
  await again.close();
});

t.test("a subscription from end sees an append made right after subscribing, without waiting for caughtUp", async (t) => {
  const { store, cleanup } = await onDouble();
  t.teardown(cleanup);
  const s = `end-${randomUUID()}`;
  await store.append(s, [{ type: "Old", data: {} }]);
  const streamSub = store.subscribeToStream(s, { fromRevision: "end" });
  const allSub = store.subscribeToAll({ fromPosition: "end", filter: { streamPrefixes: [s] } });
  await store.append(s, [{ type: "New", data: {} }]);
  for (const sub of [streamSub, allSub]) {
    const seen: string[] = [];
    for await (const item of sub) {
      seen.push(item.kind === "event" ? item.event.type : item.kind);
      if (item.kind === "event") break;
    }
    t.ok(seen.includes("New") && !seen.includes("Old"), `only the new event (${seen.join(", ")})`);
  }
});

t.test("argument checks", async (t) => {
  const { store, cleanup } = await onDouble();
  t.teardown(cleanup);
  await t.rejects(store.append("s-1", [{ type: "E", data: 1n }]), TypeError, "data must be JSON");
  await t.rejects(store.append("s-1", [{ id: "not-a-uuid", type: "E", data: {} }]), TypeError, "ids are UUIDs");
  t.same(await store.readStream("s-1", { maxCount: 0 }), [], "maxCount 0");
  t.throws(() => store.subscribeToAll({ fromPosition: -1n }), TypeError, "negative positions are refused");
});
