/**
 * The event store contract: every adapter (SQLite, EventStoreDB) must pass it.
 *
 * Written so that it also runs against a shared, non-empty EventStoreDB: every test uses stream names with
 * a random prefix (`contract<uuid>-1`) and random event type names when it filters on types, never assumes
 * that `$all` holds only its own events, and never assumes positions start at 0 or are dense (only that
 * they strictly increase). Synchronisation is by awaited events only, never by sleeping.
 */
import { randomUUID } from "node:crypto";
import type { Test } from "tap";
import {
  AppendTicket,
  AppendTooLargeError,
  MAX_APPEND_SIZE,
  WrongExpectedVersionError,
  type AppendResult,
  type CurrentRevision,
  type EventData,
  type EventStore,
  type ExpectedRevision,
  type RecordedEvent,
  type Subscription,
  type SubscriptionItem,
  PURGED_EVENT_TYPE,
  purgeBehaviourOf,
} from "../../src/eventstore/types.js";

export interface StoreUnderTest {
  store: EventStore;
  /** Releases the store and whatever it used. Must also work when the test has already closed the store. */
  cleanup(): Promise<void>;
  /**
   * EventStoreDB deletes softly: a deleted stream's events stay in `$all` until a scavenge. Where the
   * store has one (the test double), the purge test runs it before looking at `$all`.
   */
  scavenge?(): Promise<void> | void;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A fresh name space: `contract<hex>`; streams are `<prefix>-<n>`. */
function namespace(kind = "contract") {
  const prefix = `${kind}${randomUUID().replaceAll("-", "")}`;
  return { prefix, stream: (n: number | string) => `${prefix}-${n}` };
}

/** Unique event type name, for type filters on a shared `$all`. */
function uniqueType(name: string): string {
  return `${name}${randomUUID().replaceAll("-", "")}`;
}

function ev(type = "Tested", data: unknown = {}, extra: Partial<EventData> = {}): EventData {
  return { type, data, ...extra };
}

function withIds(events: EventData[]): EventData[] {
  return events.map((e) => ({ ...e, id: e.id ?? randomUUID() }));
}

function many(n: number, type = "Tested"): EventData[] {
  return Array.from({ length: n }, (_, i) => ev(type, { i }));
}

type Iter = AsyncIterator<SubscriptionItem>;

function iterate(subscription: Subscription): Iter {
  return subscription[Symbol.asyncIterator]();
}

async function nextItem(it: Iter): Promise<SubscriptionItem> {
  const r = await it.next();
  if (r.done) throw new Error("subscription ended unexpectedly");
  return r.value;
}

/** Reads items until `count` events have arrived; returns every item seen, caughtUp markers included. */
async function collectEvents(it: Iter, count: number): Promise<SubscriptionItem[]> {
  const items: SubscriptionItem[] = [];
  let events = 0;
  while (events < count) {
    const item = await nextItem(it);
    items.push(item);
    if (item.kind === "event") events++;
  }
  return items;
}

/** Reads items up to and including the caughtUp marker. */
async function untilCaughtUp(it: Iter): Promise<SubscriptionItem[]> {
  const items: SubscriptionItem[] = [];
  for (;;) {
    const item = await nextItem(it);
    items.push(item);
    if (item.kind === "caughtUp") return items;
  }
}

function eventsOf(items: SubscriptionItem[]): RecordedEvent[] {
  return items.flatMap((i) => (i.kind === "event" ? [i.event] : []));
}

/** Compact description of items: `caughtUp` or `<stream>@<revision>`. */
function brief(items: SubscriptionItem[]): string[] {
  return items.map((i) => (i.kind === "caughtUp" ? "caughtUp" : `${i.event.streamId}@${i.event.revision}`));
}

function strictlyIncreasing(values: bigint[]): boolean {
  return values.every((v, i) => i === 0 || v > values[i - 1]);
}

async function expectConflict(
  t: Test,
  attempt: Promise<unknown>,
  wanted: { stream: string; expected: ExpectedRevision; actual: CurrentRevision },
  message: string,
): Promise<void> {
  try {
    await attempt;
    t.fail(`${message}: expected a WrongExpectedVersionError, the append succeeded`);
  } catch (error) {
    t.ok(error instanceof WrongExpectedVersionError, `${message}: WrongExpectedVersionError`);
    const e = error as WrongExpectedVersionError;
    t.same({ stream: e.stream, expected: e.expected, actual: e.actual }, wanted, `${message}: error fields`);
  }
}

/** Runs the tasks with at most `width` in flight; results in task order. */
async function pool<T>(tasks: (() => Promise<T>)[], width: number): Promise<T[]> {
  const results: T[] = new Array(tasks.length);
  let next = 0;
  const worker = async () => {
    while (next < tasks.length) {
      const i = next++;
      results[i] = await tasks[i]();
    }
  };
  await Promise.all(Array.from({ length: Math.min(width, tasks.length) }, worker));
  return results;
}

export function eventStoreContract(t: Test, factory: () => Promise<StoreUnderTest>): void {
  const test = (name: string, body: (t: Test, store: EventStore, sut: StoreUnderTest) => Promise<void>) =>
    t.test(name, async (t) => {
      const sut = await factory();
      t.teardown(() => sut.cleanup());
      await body(t, sut.store, sut);
    });

  test("purgeStreams: the content leaves the stream as the adapter's purge behaviour says, other streams stay, the stream can go on", async (t, store, sut) => {
    const { prefix, stream } = namespace();
    const [gone, kept] = [stream(1), stream(2)];
    const secret = uniqueType("Secret");
    await store.append(gone, [ev(secret, { words: "forget me" }, { metadata: { actor: "alice" } }), ev(secret, { words: "me too" })]);
    await store.append(kept, [ev("Public", { words: "keep me" })]);
    const before = await store.readStream(gone);
    t.equal(before.length, 2);
    await store.purgeStreams([gone, stream(3)]); // a missing stream is no error
    const behaviour = purgeBehaviourOf(store);

    const left = await store.readStream(gone);
    t.notOk(JSON.stringify(left.map((e) => e.data)).includes("forget me"), "no payload is left");
    if (behaviour.tombstones) {
      t.same(
        left.map((e) => ({ id: e.id, revision: e.revision, position: e.position, type: e.type, data: e.data })),
        before.map((e) => ({ id: e.id, revision: e.revision, position: e.position, type: PURGED_EVENT_TYPE, data: { purged_type: secret } })),
        "each event keeps its place as a tombstone naming its type",
      );
      t.same(left[0].metadata, { actor: "alice" }, "a tombstone keeps the attribution");
    } else {
      t.same(left, [], "a read of the purged stream answers empty");
      t.same(await store.readStream(gone, { direction: "backwards" }), [], "backwards too");
    }
    const caughtUp = eventsOf(await untilCaughtUp(iterate(store.subscribeToStream(gone))));
    t.same(
      caughtUp.map((e) => e.type),
      left.map((e) => e.type),
      "a catch-up subscription to the stream replays what a read shows",
    );
    t.notOk(JSON.stringify(caughtUp.map((e) => e.data)).includes("forget me"), "and no payload");

    if (!behaviour.immediate && sut.scavenge) {
      // A soft delete (EventStoreDB): the events stay in $all until a scavenge removes them.
      const beforeScavenge = await store.readAll({ filter: { streamPrefixes: [prefix] } });
      t.ok(JSON.stringify(beforeScavenge.map((e) => e.data)).includes("forget me"), "a soft delete leaves the events in $all until a scavenge");
      await sut.scavenge();
    }
    if (behaviour.immediate || sut.scavenge) {
      const all = await store.readAll({ filter: { streamPrefixes: [prefix] } });
      t.same(
        all.filter((e) => e.streamId === gone).map((e) => e.type),
        behaviour.tombstones ? [PURGED_EVENT_TYPE, PURGED_EVENT_TYPE] : [],
        "$all shows no purged event",
      );
      t.notOk(JSON.stringify(all.map((e) => e.data)).includes("forget me"), "nor a purged payload");
      t.same(await store.readAll({ filter: { eventTypes: [secret] } }), [], "nor an event of the purged type (the type index follows)");
    }
    t.same(
      (await store.readStream(kept)).map((e) => e.data),
      [{ words: "keep me" }],
      "other streams are untouched",
    );

    const after = await store.append(gone, [ev("After", { n: 1 })], "any");
    t.equal(after.nextExpectedRevision, 2n, "the stream goes on after its last revision");
    const final = await store.readStream(gone);
    t.same(
      final.filter((e) => e.type !== PURGED_EVENT_TYPE).map((e) => [e.type, e.revision]),
      [["After", 2n]],
      "the new event, at its revision",
    );
    t.equal(final.length, behaviour.tombstones ? 3 : 1, behaviour.tombstones ? "after the tombstones" : "alone: the purged events stay out of the stream");
  });

  test("append: 0-based revisions, ids, data and metadata round-trip, result names the last event", async (t, store) => {
    const { stream } = namespace();
    const s = stream(1);
    const given = randomUUID();
    const events: EventData[] = [
      ev("First", { n: 1, nested: { list: [1, "two", null], flag: true } }, { id: given, metadata: { by: "contract" } }),
      ev("Second", "plain string"),
      ev("Third", [1, 2, 3]),
    ];
    const result = await store.append(s, events, "no_stream");
    t.equal(result.nextExpectedRevision, 2n, "nextExpectedRevision is the revision of the last event");

    const read = await store.readStream(s);
    t.same(
      read.map((e) => e.revision),
      [0n, 1n, 2n],
      "revisions are 0-based",
    );
    t.same(
      read.map((e) => e.type),
      ["First", "Second", "Third"],
      "types kept",
    );
    t.same(
      read.map((e) => e.data),
      events.map((e) => e.data),
      "data round-trips",
    );
    t.same(read[0].metadata, { by: "contract" }, "metadata round-trips");
    t.same(read[1].metadata, {}, "absent metadata reads as {}");
    t.equal(read[0].id, given, "the writer's event id is kept");
    t.ok(
      read.every((e) => UUID.test(e.id)),
      "ids are UUIDs (generated when absent)",
    );
    t.equal(new Set(read.map((e) => e.id)).size, 3, "generated ids are distinct");
    t.ok(
      read.every((e) => e.streamId === s),
      "streamId set",
    );
    t.ok(
      read.every((e) => e.created instanceof Date && !Number.isNaN(e.created.getTime())),
      "created is a Date",
    );
    t.ok(strictlyIncreasing(read.map((e) => e.position)), "positions strictly increase");
    t.equal(result.position, read[2].position, "result.position is the position of the last event");
    t.ok((await store.headPosition()) >= result.position, "headPosition is at least the last appended position");
  });

  test("after: an append that depends on others is written only once they are, and otherwise fails with the first one's error, writing nothing", async (t, store) => {
    const { stream } = namespace();
    const [first, second] = [stream(1), stream(2)];
    // Issued together, without waiting: the dependant follows what it depends on.
    const a = new AppendTicket();
    const b = new AppendTicket();
    const [ra, rb] = await Promise.all([
      store.append(first, [ev("A")], "no_stream", { ticket: a }),
      store.append(second, [ev("B")], "any", { ticket: b, after: [a] }),
    ]);
    t.ok(rb.position > ra.position, "the dependant is written after what it depends on");
    t.same([a.state, b.state], ["written", "written"], "both tickets say written");
    t.ok((await store.append(second, [ev("B2")], "any", { after: [a, b] })).position > rb.position, "a dependency written long ago holds");

    // A refused append (wrong expected revision) takes its dependants, and theirs, down with it.
    const c = new AppendTicket();
    const d = new AppendTicket();
    const outcomes = await Promise.allSettled([
      store.append(first, [ev("C")], "no_stream", { ticket: c }),
      store.append(second, [ev("D")], "any", { ticket: d, after: [c] }),
      store.append(second, [ev("E")], "any", { after: [b, d] }),
    ]);
    t.same(
      outcomes.map((o) => o.status),
      ["rejected", "rejected", "rejected"],
      "all three refused",
    );
    for (const o of outcomes)
      t.ok(
        o.status === "rejected" && o.reason instanceof WrongExpectedVersionError,
        `with the first one's WrongExpectedVersionError (${o.status === "rejected" ? String(o.reason) : ""})`,
      );
    t.same([c.state, d.state], ["failed", "failed"], "both tickets say failed");
    t.same(
      (await store.readStream(second)).map((e) => e.type),
      ["B", "B2"],
      "nothing of the dependants was written",
    );

    // Refused before it reached the log (too large): its dependant fails the same way.
    const big = new AppendTicket();
    const refused = store.append(first, [ev("Big", "x".repeat(MAX_APPEND_SIZE + 1))], "any", { ticket: big });
    const dependant = store.append(second, [ev("F")], "any", { after: [big] });
    await t.rejects(refused, AppendTooLargeError);
    await t.rejects(dependant, AppendTooLargeError, "the dependant fails with its error");
    t.equal(big.state, "failed");
    t.same(
      (await store.readStream(second)).map((e) => e.type),
      ["B", "B2"],
      "and writes nothing",
    );
  });

  test("an append over 1 MiB (EventStoreDB's default MaxAppendSize) is refused whole with AppendTooLargeError", async (t, store) => {
    const { stream } = namespace();
    const s = stream(1);
    // Each event: 2 × "Big".length + the JSON text of its data (the string plus its two quotes).
    const filler = (bytes: number) => "x".repeat(bytes - 2 - 6);
    const atLimit = await store.append(s, [ev("Big", filler(MAX_APPEND_SIZE / 2)), ev("Big", filler(MAX_APPEND_SIZE / 2))]);
    t.equal(atLimit.nextExpectedRevision, 1n, "exactly 1 MiB is accepted");
    for (const [what, events] of [
      ["one event one byte over", [ev("Big", filler(MAX_APPEND_SIZE + 1))]],
      ["three events together over", [ev("Big", filler(400_000)), ev("Big", filler(400_000)), ev("Big", filler(400_000))]],
      ["metadata counts too", [ev("Big", filler(MAX_APPEND_SIZE - 20), { metadata: { pad: "y".repeat(64) } })]],
    ] as const) {
      try {
        await store.append(s, [...events]);
        t.fail(`${what}: the append succeeded`);
      } catch (error) {
        t.ok(error instanceof AppendTooLargeError, `${what}: AppendTooLargeError (${String(error)})`);
        t.equal((error as AppendTooLargeError).maxAppendSize, MAX_APPEND_SIZE, `${what}: names the limit`);
        t.equal((error as AppendTooLargeError).stream, s, `${what}: names the stream`);
      }
    }
    t.equal((await store.readStream(s)).length, 2, "nothing of the refused appends was written");
    t.equal((await store.append(s, [ev("Small", { ok: true })])).nextExpectedRevision, 2n, "the stream takes appends afterwards");
  });

  test("expected revision no_stream", async (t, store) => {
    const { stream } = namespace();
    const s = stream(1);
    t.equal((await store.append(s, [ev()], "no_stream")).nextExpectedRevision, 0n, "creates a missing stream");
    await expectConflict(t, store.append(s, [ev()], "no_stream"), { stream: s, expected: "no_stream", actual: 0n }, "on an existing stream");
    t.equal((await store.readStream(s)).length, 1, "nothing written by the failed append");
  });

  test("expected revision stream_exists", async (t, store) => {
    const { stream } = namespace();
    const s = stream(1);
    await expectConflict(t, store.append(s, [ev()], "stream_exists"), { stream: s, expected: "stream_exists", actual: "no_stream" }, "on a missing stream");
    t.same(await store.readStream(s), [], "nothing written by the failed append");
    await store.append(s, [ev(), ev()]);
    t.equal((await store.append(s, [ev()], "stream_exists")).nextExpectedRevision, 2n, "succeeds on an existing stream");
  });

  test("expected revision as a number", async (t, store) => {
    const { stream } = namespace();
    const s = stream(1);
    await expectConflict(t, store.append(s, [ev()], 0n), { stream: s, expected: 0n, actual: "no_stream" }, "0 on a missing stream");
    await store.append(s, many(2), "no_stream");
    t.equal((await store.append(s, [ev()], 1n)).nextExpectedRevision, 2n, "the current revision succeeds");
    await expectConflict(t, store.append(s, [ev()], 1n), { stream: s, expected: 1n, actual: 2n }, "a stale revision");
    await expectConflict(t, store.append(s, [ev()], 7n), { stream: s, expected: 7n, actual: 2n }, "a revision ahead");
    t.equal((await store.readStream(s)).length, 3, "nothing written by the failed appends");
  });

  test("expected revision any never conflicts", async (t, store) => {
    const { stream } = namespace();
    const s = stream(1);
    t.equal((await store.append(s, [ev()], "any")).nextExpectedRevision, 0n, "on a missing stream");
    t.equal((await store.append(s, many(2))).nextExpectedRevision, 2n, "on an existing stream (the default)");
  });

  test("an append of no events checks the expectation and returns the current revision", async (t, store) => {
    const { stream } = namespace();
    const s = stream(1);
    await store.append(s, many(2));
    t.equal((await store.append(s, [], 1n)).nextExpectedRevision, 1n, "current revision returned");
    t.equal((await store.append(s, [], "stream_exists")).nextExpectedRevision, 1n, "stream_exists holds");
    await expectConflict(t, store.append(s, [], 0n), { stream: s, expected: 0n, actual: 1n }, "a stale revision");
    await expectConflict(t, store.append(s, [], "no_stream"), { stream: s, expected: "no_stream", actual: 1n }, "no_stream");
    t.equal((await store.readStream(s)).length, 2, "nothing written");
  });

  test("idempotent retries: the same ids give the same result and no duplicate", async (t, store) => {
    const { stream } = namespace();
    const s = stream(1);
    const events = withIds(many(2));
    const first = await store.append(s, events, "no_stream");
    t.same(await store.append(s, events, "no_stream"), first, "retry with the same expectation: same result");
    t.same(await store.append(s, events, "any"), first, "retry with any: same result");
    await store.append(s, [ev("Later")], 1n);
    t.same(await store.append(s, events, "no_stream"), first, "retry after the stream moved on: same result");
    const read = await store.readStream(s);
    t.same(
      read.map((e) => e.id),
      [events[0].id, events[1].id, read[2].id],
      "no duplicate written",
    );
  });

  test("a retry that only partly matches an earlier append is a conflict", async (t, store) => {
    const { stream } = namespace();
    const s = stream(1);
    const [a, b, c] = withIds(many(3));
    await store.append(s, [a, b], "no_stream");
    await expectConflict(t, store.append(s, [a, c]), { stream: s, expected: "any", actual: 1n }, "[a, c] after [a, b]");
    await expectConflict(t, store.append(s, [a, b, c]), { stream: s, expected: "any", actual: 1n }, "[a, b, c] after [a, b]");
    t.same(
      (await store.readStream(s)).map((e) => e.id),
      [a.id, b.id],
      "nothing written",
    );
  });

  test("a multi-event append is atomic", async (t, store) => {
    const { stream } = namespace();
    const s = stream(1);
    await store.append(s, [ev()]);
    await expectConflict(t, store.append(s, many(5), "no_stream"), { stream: s, expected: "no_stream", actual: 0n }, "failing append");
    t.equal((await store.readStream(s)).length, 1, "none of the events of a failed append is written");

    // Concurrent multi-event appends to one stream: each append's events stay together, in their order.
    const appends = Array.from({ length: 12 }, (_, w) => withIds(Array.from({ length: 4 }, (_, i) => ev("Part", { w, i }))));
    await Promise.all(appends.map((events) => store.append(s, events)));
    const read = (await store.readStream(s)).slice(1);
    t.equal(read.length, 48, "every event written once");
    const groups = Array.from({ length: 12 }, (_, g) => read.slice(g * 4, g * 4 + 4).map((e) => e.data as { w: number; i: number }));
    t.ok(
      groups.every((g) => g.every((d, i) => d.w === g[0].w && d.i === i)),
      "each append's events are contiguous and in order",
    );

    // Two concurrent creators of the same stream: exactly one append lands, whole.
    const s2 = stream(2);
    const results = await Promise.allSettled([store.append(s2, many(5, "A"), "no_stream"), store.append(s2, many(5, "B"), "no_stream")]);
    t.equal(results.filter((r) => r.status === "fulfilled").length, 1, "one creator wins");
    const types = (await store.readStream(s2)).map((e) => e.type);
    t.ok(types.length === 5 && types.every((x) => x === types[0]), "the stream holds exactly the winner's events");
  });

  test("concurrent appends with the same expected revision: exactly one wins", async (t, store) => {
    const { stream } = namespace();
    const s = stream(1);
    await store.append(s, [ev()], "no_stream");
    const results = await Promise.allSettled(Array.from({ length: 10 }, (_, i) => store.append(s, [ev("Claim", { i })], 0n)));
    const won = results.filter((r): r is PromiseFulfilledResult<AppendResult> => r.status === "fulfilled");
    t.equal(won.length, 1, "exactly one append wins");
    t.equal(won[0]?.value.nextExpectedRevision, 1n, "the winner is at revision 1");
    const lost = results.filter((r): r is PromiseRejectedResult => r.status === "rejected");
    t.ok(
      lost.every((r) => r.reason instanceof WrongExpectedVersionError && r.reason.actual === 1n),
      "the others get WrongExpectedVersion with actual 1",
    );
    t.equal((await store.readStream(s)).length, 2, "only the winner's event is written");

    const s2 = stream(2);
    const creators = await Promise.allSettled(Array.from({ length: 10 }, () => store.append(s2, [ev()], "no_stream")));
    t.equal(creators.filter((r) => r.status === "fulfilled").length, 1, "exactly one no_stream creator wins");
    t.ok(
      creators.every((r) => r.status === "fulfilled" || (r.reason instanceof WrongExpectedVersionError && r.reason.actual === 0n)),
      "the other creators see actual 0",
    );
  });

  test("positions strictly increase across streams, in append order", async (t, store) => {
    const { prefix, stream } = namespace();
    const written: { stream: string; result: AppendResult }[] = [];
    for (let i = 0; i < 9; i++) {
      const s = stream(i % 3);
      written.push({ stream: s, result: await store.append(s, [ev("Step", { i })]) });
    }
    t.ok(strictlyIncreasing(written.map((w) => w.result.position)), "append results: positions strictly increase");
    const all = await store.readAll({ fromPosition: written[0].result.position, filter: { streamPrefixes: [prefix] } });
    t.same(
      all.map((e) => (e.data as { i: number }).i),
      [0, 1, 2, 3, 4, 5, 6, 7, 8],
      "$all holds the events in append order",
    );
    t.same(
      all.map((e) => e.position),
      written.map((w) => w.result.position),
      "recorded positions are the ones the appends returned",
    );
    t.same(
      all.map((e) => e.revision),
      [0n, 0n, 0n, 1n, 1n, 1n, 2n, 2n, 2n],
      "per-stream revisions",
    );
  });

  test("readStream forwards, backwards, from a revision, with maxCount", async (t, store) => {
    const { stream } = namespace();
    const s = stream(1);
    await store.append(s, many(10));
    const revs = (events: RecordedEvent[]) => events.map((e) => Number(e.revision));
    t.same(revs(await store.readStream(s)), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], "forwards from start");
    t.same(revs(await store.readStream(s, { fromRevision: 3n, maxCount: 4 })), [3, 4, 5, 6], "forwards from 3 (inclusive), 4 events");
    t.same(revs(await store.readStream(s, { fromRevision: 8n })), [8, 9], "forwards from 8 to the end");
    t.same(revs(await store.readStream(s, { fromRevision: 10n })), [], "forwards from past the end");
    t.same(revs(await store.readStream(s, { direction: "backwards" })), [9, 8, 7, 6, 5, 4, 3, 2, 1, 0], "backwards from end");
    t.same(revs(await store.readStream(s, { direction: "backwards", fromRevision: 5n, maxCount: 3 })), [5, 4, 3], "backwards from 5 (inclusive), 3 events");
    t.same(revs(await store.readStream(s, { direction: "backwards", fromRevision: "end", maxCount: 1 })), [9], "last event");
    t.same(revs(await store.readStream(s, { fromRevision: "start", maxCount: 2 })), [0, 1], "maxCount from start");
  });

  test("storedData is what the log stores: reads from storage give it, a store's copy of its own appends gives the data", async (t, store) => {
    const { stream } = namespace();
    const s = stream(1);
    const given = { shown: "as given" };
    const stored = { shown: "as stored" };
    await store.append(s, [ev("Twofold", given, { storedData: stored }), ev("Once", { only: 1 })]);
    const fromStorage = await store.readStream(s, { fromStorage: true });
    t.same(
      fromStorage.map((e) => e.data),
      [stored, { only: 1 }],
      "read from storage: the stored form",
    );
    t.same(
      (await store.readStream(s, { fromStorage: true, direction: "backwards" })).map((e) => e.data),
      [{ only: 1 }, stored],
      "backwards too",
    );
    // The embedded store owns its file and holds what this process appended; EventStoreDB's reads go to the server.
    const held = store.kind === "sqlite";
    t.same(
      (await store.readStream(s))[0].data,
      held ? given : stored,
      held ? "a read of what this process holds: the data as given" : "a read: the stored form",
    );
    await t.rejects(store.append(s, [ev("X", {}, { storedData: 10n })]), TypeError, "a stored form that is not JSON is refused like data");
  });

  test("bad arguments are rejected as TypeError and write nothing", async (t, store) => {
    const { stream } = namespace();
    const s = stream(1);
    // A sparse array has a hole where an event should be: it must not reach the store or its client.
    // eslint-disable-next-line no-sparse-arrays
    await t.rejects(store.append(s, [, ev("X", {})] as EventData[]), TypeError, "a hole in the events array");
    await t.rejects(store.append(s, [ev("X", {}, { id: "not-a-uuid" })]), TypeError, "an id that is not a UUID");
    await t.rejects(store.append("", [ev("X", {})]), TypeError, "an empty stream name");
    t.same(await store.readStream(s), [], "nothing was written");
  });

  test("readStream of a missing stream is empty", async (t, store) => {
    const { stream } = namespace();
    t.same(await store.readStream(stream("missing")), [], "forwards");
    t.same(await store.readStream(stream("missing"), { direction: "backwards" }), [], "backwards");
  });

  test("readAll from a position (inclusive), filtered by prefix and by type, with maxCount", async (t, store) => {
    const { prefix, stream } = namespace();
    const other = namespace("other");
    const typeA = uniqueType("A");
    const typeB = uniqueType("B");
    const first = await store.append(stream(1), [ev(typeA, { n: 0 })]);
    const second = await store.append(stream(2), [ev(typeB, { n: 1 })]);
    await store.append(other.stream(1), [ev(typeA, { n: -1 })]);
    await store.append(stream(1), [ev(typeB, { n: 2 }), ev(typeA, { n: 3 })]);
    const n = (events: RecordedEvent[]) => events.map((e) => (e.data as { n: number }).n);

    t.same(n(await store.readAll({ fromPosition: first.position, filter: { streamPrefixes: [prefix] } })), [0, 1, 2, 3], "by prefix");
    const fromSecond = await store.readAll({ fromPosition: second.position, filter: { streamPrefixes: [prefix] } });
    t.same(n(fromSecond), [1, 2, 3], "fromPosition is inclusive");
    t.equal(fromSecond[0]?.position, second.position, "the first event is the one at fromPosition");
    t.same(n(await store.readAll({ fromPosition: first.position, filter: { eventTypes: [typeA] } })), [0, -1, 3], "by type");
    t.same(n(await store.readAll({ fromPosition: first.position, filter: { streamPrefixes: [prefix], eventTypes: [typeA] } })), [0, 3], "by prefix and type");
    t.same(
      n(await store.readAll({ fromPosition: first.position, filter: { streamPrefixes: [prefix] }, maxCount: 2 })),
      [0, 1],
      "maxCount counts the events returned",
    );
    t.same(n(await store.readAll({ fromPosition: first.position, filter: { streamPrefixes: [other.prefix, `${prefix}-2`] } })), [1, -1], "several prefixes");
  });

  test("catch-up subscriptions to a stream and to $all stay gap-free while 10,000 events are appended", async (t, store) => {
    const { prefix, stream } = namespace();
    const streams = [stream(0), stream(1), stream(2), stream(3)];
    const main = streams[0];
    const total = 10_000;
    const historyTarget = 2_000;
    const sizes = [1, 10, 25, 64, 3, 100, 1, 40];

    // The plan: appends of varied sizes, round-robin over the streams, every event with a known id.
    const plan: { stream: string; events: EventData[] }[] = [];
    for (let planned = 0, k = 0; planned < total; k++) {
      const size = Math.min(sizes[k % sizes.length], total - planned);
      plan.push({
        stream: streams[k % streams.length],
        events: withIds(Array.from({ length: size }, (_, i) => ev("Load", { k, i }))),
      });
      planned += size;
    }
    let split = 0;
    for (let count = 0; count < historyTarget; split++) count += plan[split].events.length;
    const history = plan.slice(0, split);
    const live = plan.slice(split);
    const count = (appends: typeof plan, s?: string) => appends.filter((a) => s === undefined || a.stream === s).reduce((n, a) => n + a.events.length, 0);

    for (const a of history) await store.append(a.stream, a.events);
    const firstPosition = (await store.readStream(main, { maxCount: 1 }))[0].position;

    const streamSub = store.subscribeToStream(main);
    const allSub = store.subscribeToAll({ filter: { streamPrefixes: [prefix] } });
    const streamIt = iterate(streamSub);
    const allIt = iterate(allSub);
    t.teardown(async () => {
      await streamSub.close();
      await allSub.close();
    });

    // Consumers and writer run concurrently: catch-up races with the appends.
    const [streamItems, allItems] = await Promise.all([
      collectEvents(streamIt, count(plan, main)),
      collectEvents(allIt, total),
      pool(
        live.map((a) => () => store.append(a.stream, a.events)),
        8,
      ),
    ]);

    // Stream subscription.
    const streamEvents = eventsOf(streamItems);
    t.same(
      streamEvents.map((e) => e.revision),
      Array.from({ length: streamEvents.length }, (_, i) => BigInt(i)),
      "stream: revisions 0..n-1 in order, no gap, no duplicate",
    );
    t.same(
      streamEvents.map((e) => e.id),
      (await store.readStream(main)).map((e) => e.id),
      "stream: exactly the events of the stream, in order",
    );
    const streamCaughtUp = streamItems.flatMap((item, i) => (item.kind === "caughtUp" ? [i] : []));
    t.equal(streamCaughtUp.length, 1, "stream: caughtUp delivered once");
    t.ok(streamCaughtUp[0] >= count(history, main), "stream: caughtUp comes after the whole history");

    // $all subscription.
    const allEvents = eventsOf(allItems);
    t.ok(strictlyIncreasing(allEvents.map((e) => e.position)), "$all: positions strictly increase");
    t.ok(
      allEvents.every((e) => e.streamId.startsWith(prefix)),
      "$all: only events of the filter",
    );
    const writtenIds = new Set(plan.flatMap((a) => a.events.map((e) => e.id as string)));
    const seenIds = new Set(allEvents.map((e) => e.id));
    t.equal(seenIds.size, total, "$all: no duplicate");
    t.ok(
      [...writtenIds].every((id) => seenIds.has(id)),
      "$all: no gap (every written event delivered)",
    );
    t.same(
      allEvents.map((e) => e.id),
      (await store.readAll({ fromPosition: firstPosition, filter: { streamPrefixes: [prefix] } })).map((e) => e.id),
      "$all: the order of the log",
    );
    const perStream = new Map<string, bigint>();
    t.ok(
      allEvents.every((e) => {
        const expected = (perStream.get(e.streamId) ?? -1n) + 1n;
        perStream.set(e.streamId, e.revision);
        return e.revision === expected;
      }),
      "$all: each stream's revisions arrive in order without gaps",
    );
    const allCaughtUp = allItems.flatMap((item, i) => (item.kind === "caughtUp" ? [i] : []));
    t.equal(allCaughtUp.length, 1, "$all: caughtUp delivered once");
    t.ok(allCaughtUp[0] >= count(history), "$all: caughtUp comes after the whole history");

    // Both are live now: one more event arrives next, with no second caughtUp.
    const marker = await store.append(main, [ev("Marker")]);
    const [s1, a1] = await Promise.all([nextItem(streamIt), nextItem(allIt)]);
    t.same(brief([s1, a1]), [`${main}@${marker.nextExpectedRevision}`, `${main}@${marker.nextExpectedRevision}`], "live event delivered next");
  });

  test("subscription start points are exclusive", async (t, store) => {
    const { prefix, stream } = namespace();
    const s = stream(1);
    await store.append(s, many(5));
    const third = (await store.readStream(s, { fromRevision: 2n, maxCount: 1 }))[0];

    const streamSub = store.subscribeToStream(s, { fromRevision: 2n });
    t.same(brief(await collectEvents(iterate(streamSub), 2)), [`${s}@3`, `${s}@4`], "stream from revision 2 delivers 3, 4");
    await streamSub.close();

    const allSub = store.subscribeToAll({ fromPosition: third.position, filter: { streamPrefixes: [prefix] } });
    t.same(brief(await collectEvents(iterate(allSub), 2)), [`${s}@3`, `${s}@4`], "$all from the position of revision 2 delivers 3, 4");
    await allSub.close();

    const startSub = store.subscribeToStream(s, { fromRevision: "start" });
    t.same(
      brief(await collectEvents(iterate(startSub), 5)),
      [0, 1, 2, 3, 4].map((r) => `${s}@${r}`),
      "start delivers from the first event",
    );
    await startSub.close();
  });

  test("subscriptions from end deliver only new events", async (t, store) => {
    const { prefix, stream } = namespace();
    const s = stream(1);
    await store.append(s, many(3));
    const streamSub = store.subscribeToStream(s, { fromRevision: "end" });
    const allSub = store.subscribeToAll({ fromPosition: "end", filter: { streamPrefixes: [prefix] } });
    t.teardown(async () => {
      await streamSub.close();
      await allSub.close();
    });
    const streamIt = iterate(streamSub);
    const allIt = iterate(allSub);
    // Wait until both are live before appending (a remote store fixes "end" when it gets the request).
    t.same(brief([await nextItem(streamIt)]), ["caughtUp"], "stream: caughtUp first, no history");
    t.same(brief([await nextItem(allIt)]), ["caughtUp"], "$all: caughtUp first, no history");
    await store.append(s, [ev("New")]);
    t.same(brief([await nextItem(streamIt)]), [`${s}@3`], "stream: the new event");
    t.same(brief([await nextItem(allIt)]), [`${s}@3`], "$all: the new event");
  });

  test("subscribeToAll filters by stream prefix and by event type, in history and live", async (t, store) => {
    const a = namespace("contracta");
    const b = namespace("contractb");
    const typeX = uniqueType("X");
    const typeY = uniqueType("Y");
    const mixed = async (tag: string) => {
      await store.append(a.stream(1), [ev(typeX, { tag, n: "a1x" }), ev(typeY, { tag, n: "a1y" })]);
      await store.append(b.stream(1), [ev(typeX, { tag, n: "b1x" }), ev(typeY, { tag, n: "b1y" })]);
      await store.append(a.stream(2), [ev(typeY, { tag, n: "a2y" })]);
    };
    const n = (items: SubscriptionItem[]) => eventsOf(items).map((e) => `${(e.data as { tag: string }).tag}:${(e.data as { n: string }).n}`);

    await mixed("h");
    const byPrefix = store.subscribeToAll({ filter: { streamPrefixes: [a.prefix] } });
    const byType = store.subscribeToAll({ filter: { eventTypes: [typeX] } });
    const byBoth = store.subscribeToAll({ filter: { streamPrefixes: [a.prefix, b.prefix], eventTypes: [typeY] } });
    t.teardown(async () => {
      for (const sub of [byPrefix, byType, byBoth]) await sub.close();
    });
    const its = [byPrefix, byType, byBoth].map(iterate);
    // History and caughtUp first, then live events.
    const history = await Promise.all(its.map(untilCaughtUp));
    const live = mixed("l");
    const [p, x, y] = (await Promise.all([collectEvents(its[0], 3), collectEvents(its[1], 2), collectEvents(its[2], 3)])).map((items, i) => [
      ...history[i],
      ...items,
    ]);
    await live;
    t.same(n(p), ["h:a1x", "h:a1y", "h:a2y", "l:a1x", "l:a1y", "l:a2y"], "by prefix");
    t.same(n(x), ["h:a1x", "h:b1x", "l:a1x", "l:b1x"], "by type");
    t.same(n(y), ["h:a1y", "h:b1y", "h:a2y", "l:a1y", "l:b1y", "l:a2y"], "by prefixes and type");
    t.ok(
      [p, x, y].every((items) => items.filter((i) => i.kind === "caughtUp").length === 1),
      "each delivered caughtUp once",
    );
    // Nothing that the filter excludes slipped in: the next item of each is a matching sentinel.
    await store.append(a.stream(3), [ev(typeX, { tag: "s", n: "x" }), ev(typeY, { tag: "s", n: "y" })]);
    t.same(n([await nextItem(its[0])]), ["s:x"], "by prefix: sentinel next");
    t.same(n([await nextItem(its[1])]), ["s:x"], "by type: sentinel next");
    t.same(n([await nextItem(its[2])]), ["s:y"], "by prefixes and type: sentinel next");
  });

  test("close() of a subscription ends iteration and stops delivery", async (t, store) => {
    const { prefix, stream } = namespace();
    const s = stream(1);
    await store.append(s, many(2));

    const sub = store.subscribeToStream(s);
    const it = iterate(sub);
    t.same(brief(await collectEvents(it, 2)), [`${s}@0`, `${s}@1`], "history");
    t.same(brief([await nextItem(it)]), ["caughtUp"], "caught up");
    const pending = it.next();
    await sub.close();
    t.same(await pending, { done: true, value: undefined }, "a pending next() resolves done");
    await store.append(s, [ev()]);
    t.equal((await it.next()).done, true, "nothing delivered after close");

    const allSub = store.subscribeToAll({ filter: { streamPrefixes: [prefix] } });
    await allSub.close();
    const seen: SubscriptionItem[] = [];
    for await (const item of allSub) seen.push(item);
    t.same(seen, [], "a subscription closed before iterating yields nothing");

    const loopSub = store.subscribeToStream(s);
    let events = 0;
    for await (const item of loopSub) {
      if (item.kind === "event" && ++events === 2) break;
    }
    await loopSub.close();
    t.equal(events, 2, "breaking out of for-await and closing is clean");
  });

  test("store.close() ends open subscriptions", async (t, store) => {
    const { stream } = namespace();
    const s = stream(1);
    await store.append(s, [ev()]);
    const sub = store.subscribeToStream(s);
    const it = iterate(sub);
    t.same(brief(await collectEvents(it, 1)), [`${s}@0`], "history");
    t.same(brief([await nextItem(it)]), ["caughtUp"], "caught up");
    const pending = it.next();
    await store.close();
    t.equal((await pending).done, true, "a pending next() resolves done");
  });
}
