/**
 * The embedded store's catch-up subscription as an async iterator, against a log held in an array (the
 * store's SQLite reads are covered by the event store contract): history in pages, `caughtUp` once, live
 * events after a commit, `next` calls answered in order, `return` and `close` ending it, a failing read
 * thrown once. Pure: no I/O.
 */
import t from "tap";
import { CatchUpSubscription, CommitHub, type CatchUpSource, type Page } from "../../src/eventstore/sqlite-subscription.js";
import type { RecordedEvent, SubscriptionItem } from "../../src/eventstore/types.js";

const PAGE = 2;

/** A log of events in one stream, read two at a time after a position; `failNextRead` makes the next read throw. */
function memoryLog() {
  const events: RecordedEvent[] = [];
  const log = {
    events,
    reads: 0,
    failNextRead: undefined as Error | undefined,
    append(type: string): void {
      const position = BigInt(events.length);
      events.push({ streamId: "s", id: `e${position}`, type, revision: position, position, data: {}, metadata: {}, created: new Date(0) });
    },
    source: {
      readAfter(cursor: bigint): Page {
        log.reads++;
        const failure = log.failNextRead;
        log.failNextRead = undefined;
        if (failure) throw failure;
        const after = events.filter((e) => e.position > cursor);
        const page = after.slice(0, PAGE);
        return { events: page, cursor: page.at(-1)?.position, atHead: after.length <= PAGE };
      },
      concerns: (touched: ReadonlySet<string>) => touched.has("s"),
    } satisfies CatchUpSource,
  };
  return log;
}

const typeOf = (item: IteratorResult<SubscriptionItem>) => (item.done ? "done" : item.value.kind === "event" ? item.value.event.type : "caughtUp");

t.test("history in pages, caughtUp once at the head, then what later commits bring, in order", async (t) => {
  const log = memoryLog();
  for (const type of ["a", "b", "c"]) log.append(type);
  const hub = new CommitHub();
  const subscription = new CatchUpSubscription(log.source, -1n, hub);
  const it = subscription[Symbol.asyncIterator]();
  const seen: string[] = [];
  for (let i = 0; i < 4; i++) seen.push(typeOf(await it.next()));
  t.same(seen, ["a", "b", "c", "caughtUp"], "three events over two pages, then caughtUp");

  const pending = it.next();
  let answered = false;
  void pending.then(() => (answered = true));
  await Promise.resolve();
  t.notOk(answered, "at the head, next waits for a commit");
  log.append("d");
  const readsBefore = log.reads;
  hub.notify(new Set(["other"]));
  await new Promise((resolve) => setImmediate(resolve));
  t.notOk(answered, "a commit to other streams does not wake it");
  hub.notify(new Set(["s"]));
  t.equal(log.reads, readsBefore, "a commit's notify reads nothing itself: the answer comes in a later microtask");
  t.equal(typeOf(await pending), "d", "the committed event");
  t.equal(hub.size, 1, "still subscribed");
  await subscription.close();
  t.equal(hub.size, 0, "close leaves the hub");
  t.equal(typeOf(await it.next()), "done", "then the iteration is over");
});

t.test("next calls made at once are answered in their order", async (t) => {
  const log = memoryLog();
  const hub = new CommitHub();
  const it = new CatchUpSubscription(log.source, -1n, hub)[Symbol.asyncIterator]();
  t.equal(typeOf(await it.next()), "caughtUp", "an empty log is caught up at once");
  const three = [it.next(), it.next(), it.next()];
  log.append("x");
  log.append("y");
  log.append("z");
  hub.notify(new Set(["s"]));
  t.same((await Promise.all(three)).map(typeOf), ["x", "y", "z"]);
});

t.test("return (a consumer's break) closes; close while a next waits answers it with done", async (t) => {
  const log = memoryLog();
  log.append("a");
  const hub = new CommitHub();
  const subscription = new CatchUpSubscription(log.source, -1n, hub);
  for await (const item of subscription) {
    t.equal(item.kind, "event");
    break;
  }
  t.equal(hub.size, 0, "breaking out of for-await closed it");

  const second = new CatchUpSubscription(log.source, 0n, hub);
  const it = second[Symbol.asyncIterator]();
  t.equal(typeOf(await it.next()), "caughtUp");
  const waiting = it.next();
  await second.close();
  t.equal(typeOf(await waiting), "done", "the waiting next ends");
});

t.test("a read that fails is thrown once to the consumer; the subscription is then closed", async (t) => {
  const log = memoryLog();
  log.append("a");
  const hub = new CommitHub();
  const it = new CatchUpSubscription(log.source, -1n, hub)[Symbol.asyncIterator]();
  log.failNextRead = new Error("disk gone");
  await t.rejects(it.next(), /disk gone/, "the first next rejects with the read's error");
  t.equal(hub.size, 0, "closed");
  t.equal(typeOf(await it.next()), "done", "and over");

  // The same when the failure comes while a next waits for a commit.
  const live = new CatchUpSubscription(log.source, 0n, hub);
  const lit = live[Symbol.asyncIterator]();
  t.equal(typeOf(await lit.next()), "caughtUp");
  const waiting = lit.next();
  const after = lit.next();
  log.append("b");
  log.failNextRead = new Error("disk gone again");
  hub.notify(new Set(["s"]));
  await t.rejects(waiting, /disk gone again/, "the waiting next rejects");
  t.equal(typeOf(await after), "done", "the one after it is done");
  t.equal(hub.size, 0);
});
