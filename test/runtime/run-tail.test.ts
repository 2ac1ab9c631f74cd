/**
 * The run tail as its own async iterator (src/runtime/run-tail.ts): what a generator gave its readers, it still
 * gives. Events in order up to the RunEnded, live; the first item and the end hook; skipped and asynchronously
 * mapped events; and the subscription let go of on every way out (end, abort, return, an error).
 */
import t, { type Test } from "tap";
import { tempSqliteStore } from "../support/temp-sqlite-store.js";
import type { RecordedEvent } from "../../src/eventstore/types.js";
import { runStream } from "../../src/domain/runs.js";
import { SKIP, tailRun, tailRunMapped } from "../../src/runtime/run-tail.js";

const sqliteStore = (t: Test) => tempSqliteStore(t, "run-tail");

const RUN = "r1";
const output = (i: number) => ({ type: "RunOutput", data: { event: "custom", data: { i } } });
const ended = { type: "RunEnded", data: { status: "success" } };
const indexOf = (e: RecordedEvent) => (e.data as { data: { i: number } }).data.i;

t.test("events in order, live, up to and including the RunEnded; then done, the subscription gone", async (t) => {
  const store = await sqliteStore(t);
  await store.append(runStream(RUN), [{ type: "RunClaimed", data: {} }, output(0)], "any");
  const tail = tailRun(store, RUN, "start", new AbortController().signal);
  t.equal(store.stats().subscriptions, 0, "nothing subscribed before the first next");
  const types: string[] = [];
  let appended = false;
  for await (const e of tail) {
    types.push(e.type === "RunOutput" ? `out${indexOf(e)}` : e.type);
    // Once the history is read, the rest comes live.
    if (!appended && types.length === 2) {
      appended = true;
      t.equal(store.stats().subscriptions, 1, "one subscription while reading");
      void store.append(runStream(RUN), [output(1), ended, output(2)], "any");
    }
  }
  t.same(types, ["RunClaimed", "out0", "out1", "RunEnded"], "nothing after the end");
  t.equal(store.stats().subscriptions, 0, "the subscription is closed at the end");
  t.same(await tail.next(), { done: true, value: undefined }, "done stays done");
});

t.test("mapped: the first item, skipped events, an asynchronous map, and the end hook after the last event", async (t) => {
  const store = await sqliteStore(t);
  await store.append(runStream(RUN), [output(0), output(1), output(2), output(3), ended], "any");
  const order: string[] = [];
  const tail = tailRunMapped(store, RUN, "start", new AbortController().signal, {
    first: "first",
    map: (e) => {
      if (e.type !== "RunOutput") return SKIP;
      const i = indexOf(e);
      if (i === 1) return SKIP;
      return i === 2 ? Promise.resolve(`later${i}`) : `out${i}`;
    },
    atEnd: async () => {
      await new Promise<void>((resolve) => setImmediate(resolve));
      order.push("atEnd");
    },
  });
  for await (const item of tail) order.push(item);
  t.same(order, ["first", "out0", "later2", "out3", "atEnd"]);
  t.equal(store.stats().subscriptions, 0);
});

t.test("from a revision: only the events after it", async (t) => {
  const store = await sqliteStore(t);
  await store.append(runStream(RUN), [output(0), output(1), output(2), ended], "any");
  const seen: number[] = [];
  for await (const e of tailRun(store, RUN, 1n, new AbortController().signal)) if (e.type === "RunOutput") seen.push(indexOf(e));
  t.same(seen, [2]);
});

t.test("a reader that leaves (abort) ends a waiting tail without the end hook, its subscription closed", async (t) => {
  const store = await sqliteStore(t);
  await store.append(runStream(RUN), [output(0)], "any");
  const controller = new AbortController();
  let atEnd = 0;
  const tail = tailRunMapped(store, RUN, "start", controller.signal, { map: (e) => e, atEnd: async () => void atEnd++ });
  t.equal((await tail.next()).done, false);
  const waiting = tail.next();
  controller.abort();
  t.same(await waiting, { done: true, value: undefined }, "the waiting next ends");
  t.equal(atEnd, 0, "no end hook for a reader that left");
  t.equal(store.stats().subscriptions, 0);
});

t.test("return() and a break let go of the subscription", async (t) => {
  const store = await sqliteStore(t);
  await store.append(runStream(RUN), [output(0), output(1)], "any");
  const tail = tailRun(store, RUN, "start", new AbortController().signal);
  await tail.next();
  t.equal(store.stats().subscriptions, 1);
  t.same(await tail.return!(), { done: true, value: undefined });
  t.equal(store.stats().subscriptions, 0, "closed by return()");
  for await (const _ of tailRun(store, RUN, "start", new AbortController().signal)) break;
  t.equal(store.stats().subscriptions, 0, "closed by a break");
});

t.test("a map that throws or rejects: the reader gets the error once, the subscription is closed", async (t) => {
  const store = await sqliteStore(t);
  await store.append(runStream(RUN), [output(0), output(1), ended], "any");
  for (const how of ["throws", "rejects"] as const) {
    let atEnd = 0;
    const tail = tailRunMapped(store, RUN, "start", new AbortController().signal, {
      map: (e) => {
        if (indexOf(e) !== 1) return "ok";
        if (how === "throws") throw new Error("bad chunk");
        return Promise.reject(new Error("bad chunk"));
      },
      atEnd: async () => void atEnd++,
    });
    t.same(await tail.next(), { done: false, value: "ok" });
    await t.rejects(tail.next(), /bad chunk/, `a map that ${how}`);
    t.equal(store.stats().subscriptions, 0, "closed");
    t.same(await tail.next(), { done: true, value: undefined }, "then done");
    t.equal(atEnd, 0, "no end hook after an error");
  }
});
