/**
 * Bounded memory per subscription, on both adapters (the embedded SQLite store and the EventStoreDB test
 * double): subscribers that do not pull while 10,000 events are appended hold at most the bound, counted
 * by the subscriptions themselves (`buffered`) and by the process-wide gauge; once they pull, each gets
 * every event exactly once, in order, and `caughtUp` once. Synchronisation by awaited events only.
 */
import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import t, { type Test } from "tap";
import { openEsdbStore } from "../../src/eventstore/esdb.js";
import { openSqliteStore } from "../../src/eventstore/sqlite.js";
import {
  ESDB_LIVE_BUFFER_EVENTS,
  SUBSCRIPTION_BUFFER,
  bufferedOf,
  subscriptionBuffers,
  type BufferedAmount,
} from "../../src/eventstore/subscription-buffers.js";
import type { EventData, EventStore, Subscription, SubscriptionItem } from "../../src/eventstore/types.js";
import { startEsdbTestDouble } from "../support/esdb-test-double.js";

const EVENTS = 10_000;
const PER_APPEND = 100;
/** Large enough that the byte bound, not the count, cuts the embedded store's pages. */
const PAD = "x".repeat(2048);

interface Adapter {
  name: string;
  open(t: Test): Promise<EventStore>;
  /** Whether live events are pushed to the subscription (then it falls behind when not pulled). */
  pushesLive: boolean;
  /** The most one subscription may hold. */
  bound: { events: number; bytes?: number };
}

const ADAPTERS: Adapter[] = [
  {
    name: "sqlite",
    pushesLive: false,
    bound: { events: SUBSCRIPTION_BUFFER.maxEvents, bytes: SUBSCRIPTION_BUFFER.maxBytes },
    async open(t) {
      const dir = await mkdtemp(path.join(os.tmpdir(), "subscription-bounds-"));
      const store = await openSqliteStore({ path: path.join(dir, "events.sqlite") });
      t.teardown(async () => {
        await store.close();
        await rm(dir, { recursive: true, force: true });
      });
      return store;
    },
  },
  {
    name: "esdb (test double)",
    pushesLive: true,
    // One history page of the adapter, or the live buffer.
    bound: { events: Math.max(500, ESDB_LIVE_BUFFER_EVENTS) },
    async open(t) {
      const double = await startEsdbTestDouble();
      const store = await openEsdbStore({ connectionString: double.connectionString });
      t.teardown(async () => {
        await store.close();
        await double.close();
      });
      return store;
    },
  },
];

function within(t: Test, amount: BufferedAmount | undefined, bound: Adapter["bound"], what: string): void {
  t.ok(amount, `${what}: the subscription reports what it holds`);
  if (!amount) return;
  t.ok(amount.events <= bound.events, `${what}: ${amount.events} events held, at most ${bound.events}`);
  // A page keeps at least one event, however large; these events are far below the byte bound.
  if (bound.bytes !== undefined) t.ok((amount.bytes ?? 0) <= bound.bytes, `${what}: ${amount.bytes} bytes held, at most ${bound.bytes}`);
}

/** Pulls until `count` events came, checking the bound after each pull; returns the items in order. */
async function drain(t: Test, subscription: Subscription, count: number, bound: Adapter["bound"], what: string): Promise<SubscriptionItem[]> {
  const items: SubscriptionItem[] = [];
  let events = 0;
  let worst: BufferedAmount = { events: 0, bytes: 0 };
  const iterator = subscription[Symbol.asyncIterator]();
  while (events < count) {
    const next = await iterator.next();
    if (next.done) break;
    items.push(next.value);
    if (next.value.kind === "event") events++;
    const held = bufferedOf(subscription);
    if (held && (held.events > worst.events || (held.bytes ?? 0) > (worst.bytes ?? 0))) worst = held;
  }
  within(t, worst, bound, `${what}, the most held while pulling`);
  return items;
}

function checkDelivery(t: Test, items: SubscriptionItem[], caughtUpBefore: number, what: string, revisions: boolean): void {
  const caughtUps = caughtUpBefore + items.filter((i) => i.kind === "caughtUp").length;
  t.equal(caughtUps, 1, `${what}: caughtUp once`);
  const events = items.flatMap((i) => (i.kind === "event" ? [i.event] : []));
  t.equal(events.length, EVENTS, `${what}: every event`);
  const indexes = events.map((e) => (e.data as { i: number }).i);
  const expected = Array.from({ length: EVENTS }, (_, i) => i);
  t.ok(
    indexes.every((n, k) => n === expected[k]),
    `${what}: each once, in order`,
  );
  if (revisions)
    t.ok(
      events.every((e, k) => e.revision === BigInt(k)),
      `${what}: revisions 0..${EVENTS - 1}`,
    );
  const positions = events.map((e) => e.position);
  t.ok(
    positions.every((p, k) => k === 0 || p > positions[k - 1]),
    `${what}: positions strictly increase`,
  );
}

for (const adapter of ADAPTERS) {
  t.test(`${adapter.name}: subscribers that do not pull hold at most the bound, then get everything once`, async (t) => {
    const store = await adapter.open(t);
    const prefix = `bounds${randomUUID().replaceAll("-", "")}`;
    const stream = `${prefix}-1`;

    // Live subscribers, caught up (the stream is empty), then left alone.
    const live = store.subscribeToStream(stream, { fromRevision: "start" });
    const liveAll = store.subscribeToAll({ fromPosition: "start", filter: { streamPrefixes: [`${prefix}-`] } });
    const liveIterator = live[Symbol.asyncIterator]();
    const liveAllIterator = liveAll[Symbol.asyncIterator]();
    t.same((await liveIterator.next()).value, { kind: "caughtUp" }, "stream subscriber: caught up on the empty stream");
    let first = await liveAllIterator.next();
    // $all holds other streams' events (the double's, none on a fresh store): skipped by the filter.
    t.same(first.value, { kind: "caughtUp" }, "$all subscriber: caught up");
    // Each asks for one more item, as a consumer does before it stalls (an SSE stream waiting for its socket to drain).
    const livePending = liveIterator.next();
    const liveAllPending = liveAllIterator.next();
    // One that is made now and never pulled until the end.
    const idle = store.subscribeToStream(stream, { fromRevision: "start" });
    t.teardown(() => Promise.all([live.close(), liveAll.close(), idle.close()]));

    subscriptionBuffers.resetPeaks();
    const behindBefore = subscriptionBuffers.fellBehind;
    for (let i = 0; i < EVENTS; i += PER_APPEND) {
      const events: EventData[] = Array.from({ length: PER_APPEND }, (_, k) => ({ type: "Bounded", data: { i: i + k, pad: PAD } }));
      await store.append(stream, events);
    }
    await store.whenDurable();
    const liveFirst = (await livePending).value as SubscriptionItem;
    const liveAllFirst = (await liveAllPending).value as SubscriptionItem;
    if (adapter.pushesLive) {
      // Both live subscribers were sent more than their buffer: each let go of it and of the server subscription.
      await subscriptionBuffers.until(() => subscriptionBuffers.fellBehind >= behindBefore + 2);
      t.pass("the live subscribers fell behind");
    }
    within(t, bufferedOf(live), adapter.bound, "stream subscriber, not pulling");
    within(t, bufferedOf(liveAll), adapter.bound, "$all subscriber, not pulling");
    within(t, bufferedOf(idle), adapter.bound, "never pulled");
    t.ok(
      subscriptionBuffers.peakEvents <= 3 * adapter.bound.events,
      `the process held at most ${3 * adapter.bound.events} events for the three (peak ${subscriptionBuffers.peakEvents})`,
    );
    if (adapter.bound.bytes !== undefined) {
      t.ok(subscriptionBuffers.peakBytes <= 3 * adapter.bound.bytes, `and at most ${3 * adapter.bound.bytes} bytes (peak ${subscriptionBuffers.peakBytes})`);
    }

    checkDelivery(t, [liveFirst, ...(await drain(t, live, EVENTS - 1, adapter.bound, "stream subscriber"))], 1, "stream subscriber", true);
    checkDelivery(t, [liveAllFirst, ...(await drain(t, liveAll, EVENTS - 1, adapter.bound, "$all subscriber"))], 1, "$all subscriber", false);
    const idleItems = await drain(t, idle, EVENTS, adapter.bound, "never pulled");
    // Its history ends where it caught up: after the events, unless a live one came first.
    if (idleItems.filter((i) => i.kind === "caughtUp").length === 0) {
      first = await idle[Symbol.asyncIterator]().next();
      idleItems.push(first.value as SubscriptionItem);
    }
    checkDelivery(t, idleItems, 0, "never pulled", true);

    // Still live after the switch: the next append arrives, with nothing repeated and no second caughtUp.
    await store.append(stream, [{ type: "Bounded", data: { i: EVENTS, pad: "" } }]);
    for (const [what, subscription] of [
      ["stream subscriber", live],
      ["$all subscriber", liveAll],
      ["never pulled", idle],
    ] as const) {
      const next = await subscription[Symbol.asyncIterator]().next();
      const item = next.value as SubscriptionItem;
      t.equal(item.kind === "event" ? (item.event.data as { i: number }).i : item.kind, EVENTS, `${what}: the next live event, once`);
    }
    await Promise.all([live.close(), liveAll.close(), idle.close()]);
    t.equal(subscriptionBuffers.events, 0, "closed subscriptions hold nothing");
  });
}
