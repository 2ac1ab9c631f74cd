import fs from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import Fastify from "fastify";
import t, { type Test } from "tap";
import { openSqliteStore, type SqliteEventStore } from "../../src/eventstore/sqlite.js";
import { durableResponses } from "../../src/http/durable-responses.js";
import { WalDurability } from "../../src/eventstore/sqlite-durability.js";
import type { RecordedEvent } from "../../src/eventstore/types.js";

async function openStore(t: Test, synchronous: "FULL" | "NORMAL"): Promise<SqliteEventStore> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "sqlite-durability-"));
  const store = await openSqliteStore({ path: path.join(dir, "events.sqlite"), synchronous });
  t.teardown(async () => {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });
  return store;
}

t.test("FULL: an append is readable at once, durable after whenDurable(), and subscribers see only durable events", async (t) => {
  const store = await openStore(t, "FULL");
  const seen: { event: RecordedEvent; durable: bigint }[] = [];
  const subscription = store.subscribeToAll();
  const consumed = (async () => {
    for await (const item of subscription) {
      if (item.kind !== "event") continue;
      // What the durability tracker says at the moment the event is handed over.
      seen.push({ event: item.event, durable: store.stats().durablePosition });
      if (seen.length === 200) break;
    }
  })();

  const results = await Promise.all(Array.from({ length: 200 }, (_, i) => store.append(`s-${i % 7}`, [{ type: "Happened", data: { i } }])));
  const last = results.reduce((max, r) => (r.position > max ? r.position : max), -1n);
  t.equal((await store.readAll()).length, 200, "every resolved append is readable in the process");
  t.equal(store.stats().committedPosition, last, "committed up to the last append");

  const pending = store.whenDurable();
  if (pending) await pending;
  t.ok(store.stats().durablePosition >= last, "durable up to the last append once whenDurable() resolved");
  t.equal(store.whenDurable(), undefined, "nothing left to wait for");

  await consumed;
  t.equal(seen.length, 200, "the subscriber got every event");
  t.ok(
    seen.every((s) => s.event.position <= s.durable),
    "no event reached the subscriber before it was durable",
  );
});

t.test("FULL: a subscription's caughtUp covers everything committed before it began, durable or not yet", async (t) => {
  const store = await openStore(t, "FULL");
  await Promise.all(Array.from({ length: 50 }, (_, i) => store.append("history", [{ type: "Happened", data: { i } }])));
  const items: string[] = [];
  for await (const item of store.subscribeToStream("history")) {
    items.push(item.kind);
    if (item.kind === "caughtUp") break;
  }
  t.equal(items.filter((k) => k === "event").length, 50, "all 50 events before caughtUp");
  t.equal(items[items.length - 1], "caughtUp");
});

t.test("NORMAL: durable at commit, nothing to wait for", async (t) => {
  const store = await openStore(t, "NORMAL");
  const result = await store.append("s", [{ type: "Happened", data: {} }]);
  t.equal(store.whenDurable(), undefined);
  t.equal(store.stats().durablePosition, result.position);
});

t.test("close makes what was committed durable and a reopened store reads it", async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), "sqlite-durability-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const file = path.join(dir, "events.sqlite");
  const store = await openSqliteStore({ path: file });
  await Promise.all(Array.from({ length: 20 }, (_, i) => store.append("s", [{ type: "Happened", data: { i } }])));
  await store.close();
  const again = await openSqliteStore({ path: file });
  t.teardown(() => again.close());
  t.equal((await again.readStream("s")).length, 20);
  t.equal(again.stats().durablePosition, again.stats().committedPosition, "a reopened store starts durable at its head");
});

t.test("the HTTP edge holds every response until the log says durable", async (t) => {
  let release: () => void = () => undefined;
  let waiting: Promise<void> | undefined = new Promise<void>((resolve) => (release = resolve));
  let asked: () => void = () => undefined;
  const wasAsked = new Promise<void>((resolve) => (asked = resolve));
  const app = Fastify();
  durableResponses(() => {
    asked();
    return waiting;
  })(app);
  app.post("/write", async () => ({ ok: true }));
  app.get("/boom", async () => {
    throw new Error("boom");
  });
  await app.listen({ host: "127.0.0.1", port: 0 });
  t.teardown(() => app.close());
  const url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;

  let answered = false;
  const response = fetch(`${url}/write`, { method: "POST" }).then((r) => {
    answered = true;
    return r;
  });
  await wasAsked; // the response is ready and waits in the hook
  t.equal(answered, false, "no response while the write is not durable");
  release();
  waiting = undefined;
  const r = await response;
  t.equal(r.status, 200);
  t.same(await r.json(), { ok: true });

  waiting = Promise.reject(new Error("fsync failed"));
  waiting.catch(() => undefined);
  const failed = await fetch(`${url}/write`, { method: "POST" });
  t.equal(failed.status, 500, "a failed fsync is an error, never a success");
  waiting = undefined;
  t.equal((await fetch(`${url}/boom`)).status, 500, "an error reply passes");
});

t.test("an fsync still queued when the store closes is no failure: the close made everything durable itself", async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), "sqlite-durability-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const failures: Error[] = [];
  const durable: bigint[] = [];
  const durability = WalDurability.fsyncing(
    path.join(dir, "events.sqlite"),
    0n,
    (p) => durable.push(p),
    (e) => failures.push(e),
  );
  // The thread pool has not run the fsync yet when the close comes: hold its callback, as a busy pool would.
  const queued: ((error: NodeJS.ErrnoException | null) => void)[] = [];
  const fdatasync = fs.fdatasync;
  fs.fdatasync = ((_fd: number, callback: (error: NodeJS.ErrnoException | null) => void) => void queued.push(callback)) as typeof fs.fdatasync;
  try {
    durability.committedUpTo(5n);
  } finally {
    fs.fdatasync = fdatasync;
  }
  t.equal(queued.length, 1, "an fsync was started for the commit");
  durability.closeSync();
  t.same(durable, [5n], "the close made the commit durable");
  queued[0](Object.assign(new Error("EBADF: bad file descriptor, fsync"), { code: "EBADF" }));
  t.same(failures, [], "the late fsync's EBADF is not reported as a failure of the log");
  t.equal(durability.whenDurable(), undefined);
});
