import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";
import Database from "better-sqlite3";
import t, { type Test } from "tap";
import { openSqliteStore, openSqliteStoreReadOnly } from "../../src/eventstore/sqlite.js";
import { CommittedEvent, RecentEvents } from "../../src/eventstore/sqlite-recent.js";
import {
  AppendTicket,
  StoreUnavailableError,
  WrongExpectedVersionError,
  matchesFilter,
  type EventFilter,
  type EventStore,
  type RecordedEvent,
  type SubscriptionItem,
} from "../../src/eventstore/types.js";
import { eventStoreContract } from "../contract/eventstore-contract.js";

async function tempDir(t: Test): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "eventstore-sqlite-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** Asserts a StoreUnavailableError whose message is one line mentioning `about`. */
async function expectUnavailable(t: Test, attempt: Promise<unknown>, about: RegExp, what: string): Promise<void> {
  try {
    await attempt;
    t.fail(`${what}: the open succeeded`);
  } catch (error) {
    t.ok(error instanceof StoreUnavailableError, `${what}: StoreUnavailableError`);
    const message = (error as Error).message;
    t.notMatch(message, /\n/, `${what}: one-line message`);
    t.match(message, about, `${what}: message says why (${message})`);
  }
}

const sqliteModule = pathToFileURL(path.resolve(import.meta.dirname, "../../src/eventstore/sqlite.ts")).href;

t.test("contract", async (t) => {
  eventStoreContract(t, async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "eventstore-sqlite-"));
    const store = await openSqliteStore({ path: path.join(dir, "events.sqlite") });
    return {
      store,
      async cleanup() {
        await store.close();
        await rm(dir, { recursive: true, force: true });
      },
    };
  });
});

t.test("data survives close and reopen; positions keep increasing", async (t) => {
  const file = path.join(await tempDir(t), "nested", "dir", "events.sqlite");
  const first = await openSqliteStore({ path: file });
  t.equal(first.kind, "sqlite");
  t.equal(await first.headPosition(), -1n, "an empty log has head -1");
  const r1 = await first.append("order-1", [{ type: "Placed", data: { total: 12.5 }, metadata: { user: "u1" } }], "no_stream");
  await first.append("order-2", [{ type: "Placed", data: { total: 3 } }]);
  await first.close();
  await first.close(); // idempotent

  const second = await openSqliteStore({ path: file });
  t.teardown(() => second.close());
  const read = await second.readStream("order-1");
  t.same(
    read.map((e) => [e.type, e.data, e.metadata, e.revision, e.position]),
    [["Placed", { total: 12.5 }, { user: "u1" }, 0n, r1.position]],
    "events are there after reopening",
  );
  t.equal((await second.readAll()).length, 2, "the whole log is there");
  const r3 = await second.append("order-1", [{ type: "Shipped", data: {} }], 0n);
  t.equal(r3.nextExpectedRevision, 1n, "stream revisions continue");
  t.ok(r3.position > (await second.readStream("order-2"))[0].position, "positions continue after reopening");
});

t.test("only one process (or connection) can own the file", async (t) => {
  const file = path.join(await tempDir(t), "events.sqlite");
  const owner = await openSqliteStore({ path: file });
  await expectUnavailable(t, openSqliteStore({ path: file }), /is locked by another process/, "second open in this process");
  await owner.close();
  const again = await openSqliteStore({ path: file });
  t.equal(again.kind, "sqlite", "the file can be opened once the owner closed it");
  await again.close();
});

t.test("a file that is not an event database is refused with a one-line reason", async (t) => {
  const dir = await tempDir(t);
  const garbage = path.join(dir, "garbage.sqlite");
  await writeFile(garbage, "this is not a database\n".repeat(200));
  await expectUnavailable(t, openSqliteStore({ path: garbage }), /is not an SQLite database/, "garbage file");

  const directory = path.join(dir, "a-directory");
  await mkdir(directory);
  await expectUnavailable(t, openSqliteStore({ path: directory }), /cannot open database .*it is a directory/, "a directory");

  const blocked = path.join(dir, "a-file", "events.sqlite");
  await writeFile(path.join(dir, "a-file"), "");
  await expectUnavailable(t, openSqliteStore({ path: blocked }), /cannot create directory/, "parent is a file");
});

t.test("group commit: concurrent appends share one transaction; a failing append fails alone", async (t) => {
  const store = await openSqliteStore({ path: path.join(await tempDir(t), "events.sqlite") });
  t.teardown(() => store.close());
  await store.append("claim-1", [{ type: "Opened", data: {} }]);

  let before = store.stats();
  for (let i = 0; i < 5; i++) await store.append("seq-1", [{ type: "One", data: { i } }]);
  t.equal(store.stats().transactions - before.transactions, 5, "awaited appends: one transaction each");

  before = store.stats();
  const results = await Promise.allSettled([
    ...Array.from({ length: 50 }, (_, i) => store.append(`batch-${i}`, [{ type: "One", data: { i } }], "no_stream")),
    store.append("claim-1", [{ type: "Claimed", data: {} }], 5n), // wrong expectation
    store.append("claim-1", [{ type: "Claimed", data: {} }], 0n),
    store.append("claim-1", [{ type: "Claimed", data: {} }], 0n), // loses to the previous one, same batch
  ]);
  const after = store.stats();
  t.equal(after.transactions - before.transactions, 1, "53 concurrent appends committed in one transaction");
  t.equal(after.appends - before.appends, 51, "51 appends succeeded");
  t.same(
    results.map((r) => r.status),
    [...Array(50).fill("fulfilled"), "rejected", "fulfilled", "rejected"],
    "only the appends whose expectation failed were rejected",
  );
  const lost = results[52] as PromiseRejectedResult;
  t.ok(lost.reason instanceof WrongExpectedVersionError && lost.reason.actual === 1n, "the loser saw the winner of the same batch");
  t.equal((await store.readStream("claim-1")).length, 2, "claim stream: exactly the winner was written");
  t.equal((await store.readAll({ filter: { streamPrefixes: ["batch-"] } })).length, 50, "every batched append was written");
});

t.test("appends of one turn share a commit; an urgent one takes what is queued along, and leaves nothing behind", async (t) => {
  const store = await openSqliteStore({ path: path.join(await tempDir(t), "events.sqlite") });
  t.teardown(() => store.close());
  await store.append("warm-1", [{ type: "One", data: {} }]);

  let before = store.stats();
  await Promise.all([store.append("plain-1", [{ type: "One", data: {} }]), store.append("plain-2", [{ type: "One", data: {} }])]);
  t.equal(store.stats().transactions - before.transactions, 1, "two ordinary appends of one turn: one transaction");

  before = store.stats();
  const queued = store.append("queued-1", [{ type: "One", data: {} }]);
  const urgent = store.append("urgent-1", [{ type: "End", data: {} }], "no_stream", { urgent: true });
  await Promise.all([queued, urgent]);
  t.equal(store.stats().transactions - before.transactions, 1, "the urgent append and the one queued before it: one transaction");
  await store.append("after-1", [{ type: "One", data: {} }]);
  t.equal(store.stats().transactions - before.transactions, 2, "nothing was left queued for another commit: the next append is the only other one");
  t.same(
    (await store.readStream("urgent-1")).map((e) => e.type),
    ["End"],
    "durable and readable",
  );
  t.same(
    (await store.readStream("queued-1")).map((e) => e.type),
    ["One"],
    "the queued one too",
  );
});

t.test("after: a dependant goes into the transaction of the queued appends it depends on, and is undone alone when one of them fails", async (t) => {
  const store = await openSqliteStore({ path: path.join(await tempDir(t), "events.sqlite") });
  t.teardown(() => store.close());
  await store.append("end-1", [{ type: "Opened", data: {} }]);

  let before = store.stats();
  const writes = [new AppendTicket(), new AppendTicket()];
  const end = new AppendTicket();
  await Promise.all([
    store.append("checkpoints-1", [{ type: "Saved", data: { n: 1 } }], "any", { ticket: writes[0] }),
    store.append("checkpoints-1", [{ type: "Saved", data: { n: 2 } }], "any", { ticket: writes[1] }),
    store.append("end-1", [{ type: "Ended", data: {} }], 0n, { ticket: end, after: writes, urgent: true }),
    store.append("mark-1", [{ type: "Finished", data: {} }], "any", { after: [end], urgent: true }),
  ]);
  t.equal(store.stats().transactions - before.transactions, 1, "the writes, the end and the mark: one transaction");

  before = store.stats();
  const refused = new AppendTicket();
  const outcomes = await Promise.allSettled([
    store.append("checkpoints-1", [{ type: "Saved", data: { n: 3 } }], 0n, { ticket: refused }), // wrong expectation
    store.append("unrelated-1", [{ type: "Other", data: {} }]),
    store.append("end-1", [{ type: "Ended", data: {} }], "any", { after: [refused], urgent: true }),
  ]);
  t.equal(store.stats().transactions - before.transactions, 1, "one transaction");
  t.same(
    outcomes.map((o) => o.status),
    ["rejected", "fulfilled", "rejected"],
    "the dependant fails with what it depends on; the rest commits",
  );
  t.same(
    (await store.readStream("end-1")).map((e) => e.type),
    ["Opened", "Ended"],
    "nothing of the refused dependant was written",
  );
});

t.test("subscriptions release their listener when closed or abandoned, and on store close", async (t) => {
  const store = await openSqliteStore({ path: path.join(await tempDir(t), "events.sqlite") });
  t.teardown(() => store.close());
  await store.append("sub-1", [{ type: "A", data: {} }]);
  const closed = store.subscribeToStream("sub-1");
  const broken = store.subscribeToAll();
  const open = store.subscribeToAll({ filter: { eventTypes: ["A"] } });
  t.equal(store.stats().subscriptions, 3, "three listening");
  await closed.close();
  for await (const item of broken) if (item.kind === "event") break;
  t.equal(store.stats().subscriptions, 1, "close() and leaving a for-await release the listener");
  const it = open[Symbol.asyncIterator]();
  t.equal((await it.next()).value?.kind, "event", "history");
  t.equal((await it.next()).value?.kind, "caughtUp", "caught up");
  const pending = it.next();
  await store.close();
  t.equal((await pending).done, true, "store.close() ends the open subscription");
  t.equal(store.stats().subscriptions, 0, "and releases it");
});

t.test("close() commits queued appends, then refuses new work", async (t) => {
  const file = path.join(await tempDir(t), "events.sqlite");
  const store = await openSqliteStore({ path: file });
  const queued = Array.from({ length: 20 }, (_, i) => store.append("queued-1", [{ type: "Q", data: { i } }]));
  await store.close();
  const results = await Promise.all(queued);
  t.equal(results[19].nextExpectedRevision, 19n, "appends queued before close() were committed");
  await t.rejects(store.append("queued-1", [{ type: "Q", data: {} }]), StoreUnavailableError, "append after close rejects");
  await t.rejects(store.readStream("queued-1"), StoreUnavailableError, "read after close rejects");

  const reopened = await openSqliteStore({ path: file });
  t.equal((await reopened.readStream("queued-1")).length, 20, "they are in the file");
  await reopened.close();
});

t.test("inputs are validated", async (t) => {
  const store = await openSqliteStore({ path: path.join(await tempDir(t), "events.sqlite") });
  t.teardown(() => store.close());
  await t.rejects(store.append("", [{ type: "X", data: {} }]), TypeError, "empty stream name");
  await t.rejects(store.append("s-1", [{ type: "", data: {} }]), TypeError, "empty type");
  await t.rejects(store.append("s-1", [{ id: "not-a-uuid", type: "X", data: {} }]), TypeError, "id that is not a UUID");
  const id = randomUUID();
  await t.rejects(
    store.append("s-1", [
      { id, type: "X", data: {} },
      { id, type: "X", data: {} },
    ]),
    TypeError,
    "the same id twice in one append",
  );
  await t.rejects(store.append("s-1", [{ type: "X", data: undefined }]), TypeError, "data that is not JSON");
  await t.rejects(store.append("s-1", [], -1n), TypeError, "negative expected revision");
  await t.rejects(store.readStream("s-1", { maxCount: -1 }), TypeError, "negative maxCount");
  t.throws(() => store.subscribeToStream(""), TypeError, "subscription to an empty stream name");
  t.same(await store.readAll(), [], "nothing was written");
});

t.test("an acknowledged append survives kill -9", async (t) => {
  const dir = await tempDir(t);
  const file = path.join(dir, "events.sqlite");
  const child = path.join(dir, "writer.mjs");
  // 8 concurrent writers append until killed; a line on stdout (a pipe: written synchronously) = acknowledged.
  await writeFile(
    child,
    `import { openSqliteStore } from ${JSON.stringify(sqliteModule)};
const store = await openSqliteStore({ path: process.argv[2] });
process.stdout.write("ready\\n");
let n = 0;
const writer = async (w) => {
  for (;;) {
    const id = crypto.randomUUID();
    const events = Array.from({ length: 1 + (n++ % 3) }, (_, i) => ({ id: i === 0 ? id : undefined, type: "Crash", data: { w, pad: "x".repeat(500) } }));
    const r = await store.append("crash-" + w, events);
    process.stdout.write(JSON.stringify({ stream: "crash-" + w, id, last: String(r.nextExpectedRevision), position: String(r.position), count: events.length }) + "\\n");
  }
};
for (let w = 0; w < 8; w++) void writer(w);
`,
  );
  const proc = spawn(process.execPath, ["--import", "tsx", child, file], { stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  proc.stderr.on("data", (chunk) => (stderr += chunk));
  const exited = new Promise<NodeJS.Signals | null>((resolve) => proc.on("exit", (_code, signal) => resolve(signal)));
  const acked: { stream: string; id: string; last: string; position: string; count: number }[] = [];
  const lines = createInterface({ input: proc.stdout });
  for await (const line of lines) {
    if (line === "ready") {
      // While the child owns the file, this process cannot open it.
      await expectUnavailable(t, openSqliteStore({ path: file }), /is locked by another process/, "open while another process owns it");
      continue;
    }
    acked.push(JSON.parse(line));
    if (acked.length === 3000) proc.kill("SIGKILL");
  }
  t.equal(await exited, "SIGKILL", `the writer was killed (stderr: ${stderr.trim() || "none"})`);
  t.ok(acked.length >= 3000, `${acked.length} appends acknowledged before the kill`);

  const store = await openSqliteStore({ path: file });
  t.teardown(() => store.close());
  const logged = new Map((await store.readAll()).map((e) => [`${e.streamId}@${e.revision}`, e]));
  const missing = acked.filter((a) => {
    const last = BigInt(a.last);
    const first = last - BigInt(a.count - 1);
    for (let r = first; r <= last; r++) if (!logged.has(`${a.stream}@${r}`)) return true;
    return logged.get(`${a.stream}@${first}`)?.id !== a.id || logged.get(`${a.stream}@${last}`)?.position !== BigInt(a.position);
  });
  t.same(missing, [], "every acknowledged append is in the log after kill -9, at its acknowledged revision and position");
});

// ------------------------------------------------------------------------------------- hot path (read side)

/** Events of three types over two stream categories, interleaved, more than two pages (1000 rows) of each. */
async function mixedLog(store: EventStore, n: number): Promise<void> {
  for (let i = 0; i < n; i += 500) {
    await Promise.all(
      Array.from({ length: Math.min(500, n - i) }, (_, k) => {
        const j = i + k;
        const type = ["Small", "Blob", "Other"][j % 3];
        return store.append(`${j % 2 ? "a" : "b"}-${j % 7}`, [{ type, data: { j } }]);
      }),
    );
  }
}

const positions = (events: RecordedEvent[]) => events.map((e) => e.position);

t.test("reads filtered by type use the type index and give what filtering every row gives", async (t) => {
  const file = path.join(await tempDir(t), "events.sqlite");
  const writer = await openSqliteStore({ path: file });
  await mixedLog(writer, 7_000);
  const everything = await writer.readAll();
  await writer.close();
  const filters: EventFilter[] = [
    { eventTypes: ["Small", "Other"] },
    { eventTypes: ["Other", "Small", "Other"] },
    { eventTypes: ["Blob"], streamPrefixes: ["a-"] },
    { eventTypes: [] },
    { eventTypes: ["Nothing"] },
  ];
  // A store just opened holds no recent events: every read goes to the database.
  const store = await openSqliteStore({ path: file });
  t.teardown(() => store.close());
  for (const filter of filters) {
    const expected = everything.filter((e) => matchesFilter(e.streamId, e.type, filter));
    const what = JSON.stringify(filter);
    t.same(positions(await store.readAll({ filter })), positions(expected), `readAll ${what}`);
    t.same(positions(await store.readAll({ filter, maxCount: 1500 })), positions(expected.slice(0, 1500)), `readAll ${what}, maxCount`);
    const from = everything[2345].position;
    t.same(
      positions(await store.readAll({ filter, fromPosition: from })),
      positions(expected.filter((e) => e.position >= from)),
      `readAll ${what} from a position`,
    );
    const seen: RecordedEvent[] = [];
    for await (const item of store.subscribeToAll({ filter })) {
      if (item.kind === "caughtUp") break;
      seen.push(item.event);
    }
    t.same(positions(seen), positions(expected), `subscribeToAll ${what}`);
  }
});

t.test("filtered reads over skewed types: one type fills pages while another waits after them", async (t) => {
  const file = path.join(await tempDir(t), "events.sqlite");
  const writer = await openSqliteStore({ path: file });
  // 2,500 of one type, then 1,200 of another, then both interleaved: page ends come from either type.
  const plan = [
    ...Array(2_500).fill("Created"),
    ...Array(1_200).fill("Enqueued"),
    ...Array.from({ length: 1_100 }, (_, i) => (i % 3 ? "Created" : "Enqueued")),
  ];
  for (let i = 0; i < plan.length; i += 400) {
    await Promise.all(plan.slice(i, i + 400).map((type, k) => writer.append(`s-${(i + k) % 11}`, [{ type, data: { i: i + k } }])));
  }
  await writer.append("noise-1", [{ type: "Noise", data: {} }]);
  const everything = await writer.readAll();
  await writer.close();
  // A store just opened holds no recent events: every read goes to the database's type index.
  const store = await openSqliteStore({ path: file });
  t.teardown(() => store.close());
  for (const filter of [
    { eventTypes: ["Created", "Enqueued"] },
    { eventTypes: ["Enqueued"] },
    { eventTypes: ["Created", "Enqueued", "Noise"] },
  ] as EventFilter[]) {
    const expected = everything.filter((e) => matchesFilter(e.streamId, e.type, filter));
    const seen: RecordedEvent[] = [];
    for await (const item of store.subscribeToAll({ filter })) {
      if (item.kind === "caughtUp") break;
      seen.push(item.event);
    }
    t.same(positions(seen), positions(expected), `subscribeToAll ${JSON.stringify(filter)}`);
    t.same(
      positions(await store.readAll({ filter, fromPosition: everything[3_000].position })),
      positions(expected.filter((e) => e.position >= everything[3_000].position)),
    );
  }
});

/** A file as a version 1 or 2 server wrote it: AUTOINCREMENT positions and the streams table beside the events. */
async function olderFile(t: Test, version: 1 | 2): Promise<string> {
  const file = path.join(await tempDir(t), "events.sqlite");
  const old = new Database(file);
  old.exec(`
    CREATE TABLE events (
      position INTEGER PRIMARY KEY AUTOINCREMENT, stream_id TEXT NOT NULL, revision INTEGER NOT NULL,
      event_id TEXT NOT NULL UNIQUE, type TEXT NOT NULL, data TEXT NOT NULL, metadata TEXT, created INTEGER NOT NULL,
      UNIQUE (stream_id, revision)
    );
    CREATE TABLE streams (stream_id TEXT PRIMARY KEY, revision INTEGER NOT NULL) WITHOUT ROWID;
    INSERT INTO events (stream_id, revision, event_id, type, data, metadata, created)
      VALUES ('order-1', 0, '${randomUUID()}', 'Placed', '{"total":3}', NULL, 1700000000000);
    INSERT INTO events (stream_id, revision, event_id, type, data, metadata, created)
      VALUES ('order-1', 1, '${randomUUID()}', 'Packed', '{}', NULL, 1700000000001);
    INSERT INTO streams VALUES ('order-1', 1);
    ${version === 2 ? "CREATE INDEX events_type_position ON events (type, position);" : ""}
    PRAGMA user_version = ${version};
  `);
  old.close();
  return file;
}

for (const version of [1, 2] as const) {
  t.test(`a version ${version} file is upgraded in place: type index, no streams table, events and revisions kept`, async (t) => {
    const file = await olderFile(t, version);
    const store = await openSqliteStore({ path: file });
    t.same(
      (await store.readAll({ filter: { eventTypes: ["Placed"] } })).map((e) => e.data),
      [{ total: 3 }],
      "events kept, filtered read works",
    );
    await t.rejects(store.append("order-1", [{ type: "Paid", data: {} }], 0n), { name: "WrongExpectedVersionError" }, "the stream's revision is still 1");
    const paid = await store.append("order-1", [{ type: "Paid", data: {} }], 1n);
    t.equal(paid.nextExpectedRevision, 2n);
    t.equal(paid.position, 3n, "positions go on after the file's last one");
    t.same(
      (await store.readStream("order-1", { fromRevision: "end", direction: "backwards", maxCount: 1 })).map((e) => e.type),
      ["Paid"],
      "read from the end finds the new last event",
    );
    await store.close();

    const db = new Database(file, { readonly: true });
    t.teardown(() => db.close());
    t.equal(db.pragma("user_version", { simple: true }), 3, "schema version 3");
    t.ok(db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = 'events_type_position'").get(), "type index exists");
    t.notOk(db.prepare("SELECT 1 FROM sqlite_master WHERE name = 'streams'").get(), "the streams table is gone");
    const plan = db.prepare("EXPLAIN QUERY PLAN SELECT data FROM events WHERE type = ? AND position >= ? ORDER BY position LIMIT ?").all("Placed", 0, 10) as {
      detail: string;
    }[];
    t.match(plan.map((p) => p.detail).join("; "), /USING INDEX events_type_position/, "a type read is an index range scan");
  });
}

t.test("a read-only open (npm run replay) reads a version 2 file as it is, and refuses a version 1 file", async (t) => {
  const v2 = await olderFile(t, 2);
  const reader = openSqliteStoreReadOnly(v2);
  t.same(
    (await reader.readStream("order-1", { fromRevision: "end", direction: "backwards" })).map((e) => e.type),
    ["Packed", "Placed"],
  );
  await reader.close();
  const db = new Database(v2, { readonly: true });
  t.teardown(() => db.close());
  t.equal(db.pragma("user_version", { simple: true }), 2, "not upgraded by a reader");
  const v1 = await olderFile(t, 1);
  t.throws(() => openSqliteStoreReadOnly(v1), /schema version 1, this tool reads 2 and 3/);
});

t.test("a new file: a stream's revision comes from the (stream_id, revision) index, positions from the rowid, never reused", async (t) => {
  const file = path.join(await tempDir(t), "events.sqlite");
  const store = await openSqliteStore({ path: file });
  const first = await store.append(
    "order-1",
    [
      { type: "Placed", data: {} },
      { type: "Packed", data: {} },
    ],
    "no_stream",
  );
  // A refused append in the same group commit as a good one: its rows are undone, its positions not handed out.
  const [refused, other] = await Promise.allSettled([
    store.append("order-1", [{ type: "Paid", data: {} }], 0n),
    store.append("order-2", [{ type: "Placed", data: {} }], "no_stream"),
  ]);
  t.equal(refused.status, "rejected", "a stale expected revision is refused");
  t.equal(other.status, "fulfilled");
  const next = await store.append("order-1", [{ type: "Paid", data: {} }], 1n);
  t.equal(next.nextExpectedRevision, 2n);
  await store.close();

  const db = new Database(file, { readonly: true });
  t.teardown(() => db.close());
  db.defaultSafeIntegers(true);
  t.notOk(db.prepare("SELECT 1 FROM sqlite_master WHERE name IN ('streams', 'sqlite_sequence')").get(), "no streams table, no AUTOINCREMENT counter");
  const rows = db.prepare("SELECT position, stream_id, revision FROM events ORDER BY position").all() as {
    position: bigint;
    stream_id: string;
    revision: bigint;
  }[];
  t.same(
    rows.map((r) => [r.stream_id, Number(r.revision)]),
    [
      ["order-1", 0],
      ["order-1", 1],
      ["order-2", 0],
      ["order-1", 2],
    ],
  );
  t.same(
    rows.map((r) => r.position),
    [first.position - 1n, first.position, first.position + 1n, next.position],
    "strictly increasing, in commit order",
  );
  const plan = db.prepare("EXPLAIN QUERY PLAN SELECT revision FROM events WHERE stream_id = ? ORDER BY revision DESC LIMIT 1").all("order-1") as {
    detail: string;
  }[];
  t.match(plan.map((p) => p.detail).join("; "), /COVERING INDEX/, "a stream's revision is one seek in the index");
});

t.test("a stream's head for an append: written earlier in the same batch, held in memory, or read from the index", async (t) => {
  const file = path.join(await tempDir(t), "events.sqlite");
  let store = await openSqliteStore({ path: file });
  await store.append("cart-1", [{ type: "Opened", data: {} }], "no_stream");
  const taken = randomUUID();
  await store.append("other-1", [{ id: taken, type: "Taken", data: {} }]);
  const before = store.stats();
  // One group commit: an append whose second event id is taken is undone alone (its first row too); the
  // appends after it in the batch see the head without it.
  const outcomes = await Promise.allSettled([
    store.append("cart-1", [{ type: "Added", data: { n: 1 } }], 0n),
    store.append(
      "cart-1",
      [
        { id: randomUUID(), type: "Added", data: { n: 2 } },
        { id: taken, type: "Added", data: { n: 3 } },
      ],
      1n,
    ),
    store.append("cart-1", [{ type: "Added", data: { n: 4 } }], 1n),
    store.append("cart-1", [{ type: "Added", data: { n: 5 } }], 1n), // stale: the previous one in this batch moved the head
  ]);
  t.equal(store.stats().transactions - before.transactions, 1, "one transaction");
  t.same(
    outcomes.map((o) => o.status),
    ["fulfilled", "rejected", "fulfilled", "rejected"],
  );
  t.equal(((outcomes[3] as PromiseRejectedResult).reason as WrongExpectedVersionError).actual, 2n, "the stale one saw the batch's head");
  t.same(
    (await store.readStream("cart-1")).map((e) => [e.revision, (e.data as { n?: number }).n]),
    [
      [0n, undefined],
      [1n, 1],
      [2n, 4],
    ],
  );
  t.equal((await store.append("cart-1", [{ type: "Added", data: { n: 6 } }], 2n)).nextExpectedRevision, 3n, "held in memory after the commit");
  await store.close();

  store = await openSqliteStore({ path: file });
  t.teardown(() => store.close());
  t.equal(store.stats().recentEvents, 0, "nothing held after a reopen");
  await t.rejects(store.append("cart-1", [{ type: "Added", data: {} }], 2n), WrongExpectedVersionError, "the head from the index");
  t.equal((await store.append("cart-1", [{ type: "Added", data: { n: 7 } }], 3n)).nextExpectedRevision, 4n);
});

t.test("committed events reach every reader parsed once, frozen, and recent reads need no query", async (t) => {
  const store = await openSqliteStore({ path: path.join(await tempDir(t), "events.sqlite") });
  t.teardown(() => store.close());
  const one = store.subscribeToStream("order-1")[Symbol.asyncIterator]();
  const all = store.subscribeToAll()[Symbol.asyncIterator]();
  t.equal((await one.next()).value?.kind, "caughtUp");
  t.equal((await all.next()).value?.kind, "caughtUp");
  await store.append("order-1", [{ type: "Placed", data: { lines: [{ sku: "x", qty: 1 }] } }]);
  const a = (await one.next()).value as SubscriptionItem;
  const b = (await all.next()).value as SubscriptionItem;
  t.ok(a.kind === "event" && b.kind === "event" && a.event === b.event, "both subscribers got the same object");
  const event = (a as { event: RecordedEvent }).event;
  t.equal((await store.readStream("order-1"))[0], event, "a read of recent history gets it too");
  t.ok(Object.isFrozen(event) && Object.isFrozen(event.data) && Object.isFrozen((event.data as { lines: object[] }).lines[0]), "deep-frozen");
  t.throws(
    () => {
      (event.data as { lines: { qty: number }[] }).lines[0].qty = 2;
    },
    TypeError,
    "a reader cannot change what the others see",
  );
  t.equal(store.stats().recentEvents, 1);
});

t.test("RecentEvents: holds the last events, answers only what it holds entirely", async (t) => {
  const e = (position: number, stream: string, revision: number) =>
    new CommittedEvent(BigInt(position), stream, BigInt(revision), randomUUID(), "E", `{"p":${position}}`, null, 0);
  const recent = new RecentEvents(10n, { maxEvents: 3, maxBytes: 1 << 20 });
  t.same(recent.after(10n, 100), [], "nothing after the head yet");
  t.equal(recent.after(9n, 100), undefined, "before the head: not held");
  t.equal(recent.streamFrom("s", 0n, 100), undefined, "a stream with nothing held: unknown");
  recent.add([e(11, "s", 4), e(12, "t", 0)]);
  recent.add([e(13, "s", 5)]);
  t.same(
    recent.after(10n, 100)?.map((x) => x.position),
    [11n, 12n, 13n],
  );
  t.same(
    recent.after(11n, 1)?.map((x) => x.position),
    [12n],
    "limit",
  );
  t.same(
    recent.streamFrom("s", 4n, 100)?.map((x) => x.revision),
    [4n, 5n],
  );
  t.same(recent.streamFrom("s", 6n, 100), [], "after the end of the stream: nothing");
  t.equal(recent.streamFrom("s", 3n, 100), undefined, "revision 3 is older than what is held");
  t.same(
    recent.streamBackwards("s", 5n, 1)?.map((x) => x.revision),
    [5n],
    "backwards from the end: the last one",
  );
  t.same(
    recent.streamBackwards("s", 100n, 2)?.map((x) => x.revision),
    [5n, 4n],
    "newest first",
  );
  t.equal(recent.streamBackwards("s", 5n, 3), undefined, "more than is held of a stream that starts earlier: not answered");
  t.equal(recent.streamBackwards("s", 3n, 1), undefined, "older than what is held");
  t.same(
    recent.streamBackwards("t", 100n, 5)?.map((x) => x.revision),
    [0n],
    "a whole stream, shorter than the limit",
  );
  t.equal(recent.streamBackwards("u", 100n, 5), undefined, "a stream with nothing held: unknown");
  t.equal(recent.lastRevision("s"), 5n, "a held stream's last revision");
  t.equal(recent.lastRevision("u"), undefined, "a stream with nothing held: unknown");
  recent.add([e(14, "t", 1)]); // evicts position 11
  t.equal(recent.size, 3);
  t.equal(recent.after(10n, 100), undefined, "evicted: position 11 is no longer held");
  t.same(
    recent.after(11n, 100)?.map((x) => x.position),
    [12n, 13n, 14n],
  );
  t.equal(recent.streamFrom("s", 4n, 100), undefined, "s@4 evicted");
  t.same(
    recent.streamFrom("s", 5n, 100)?.map((x) => x.position),
    [13n],
  );
  t.equal(recent.lastRevision("s"), 5n, "still its last revision after its oldest held event went");
  t.same(recent.after(11n, 100)?.[0].event.data, { p: 12 }, "parsed on demand");
  t.equal(recent.after(11n, 100)?.[0].event, recent.after(11n, 100)?.[0].event, "once");

  const small = new RecentEvents(0n, { maxEvents: 100, maxBytes: 200 });
  small.add([e(1, "s", 0), e(2, "s", 1), e(3, "s", 2)]);
  t.ok(small.size < 3, "the byte bound evicts too");
});

/** Names of the files in `dir` whose bytes contain `needle`. */
async function filesHolding(dir: string, needle: string): Promise<string[]> {
  const found: string[] = [];
  for (const name of (await readdir(dir)).sort()) if ((await readFile(path.join(dir, name))).includes(Buffer.from(needle))) found.push(name);
  return found;
}

t.test("purgeStreams removes the bytes: neither the database file nor its WAL holds the purged payloads, open or closed", async (t) => {
  const dir = await tempDir(t);
  const store = await openSqliteStore({ path: path.join(dir, "events.sqlite") });
  t.teardown(() => store.close());
  const secret = `forgetme${randomUUID().replaceAll("-", "")}`;
  const kept = `keepme${randomUUID().replaceAll("-", "")}`;
  // Enough events to split pages (and move rows to new pages), some larger than a page (overflow chains).
  for (let i = 0; i < 40; i++) {
    await store.append(`kept-${i}`, [{ type: "Public", data: { words: `${kept} ${"k".repeat(i % 5 === 0 ? 9000 : 300)}` } }]);
    await store.append("secret-1", [{ type: "Secret", data: { words: `${secret} ${"s".repeat(i % 5 === 0 ? 9000 : 300)}` } }]);
  }
  t.same(await filesHolding(dir, secret), ["events.sqlite-wal"], "before the purge the payloads are in the WAL");
  await store.purgeStreams(["secret-1"]);
  t.same(await filesHolding(dir, secret), [], "open: in no file once purgeStreams returned");
  t.not((await filesHolding(dir, kept)).length, 0, "the kept payloads are found (the scan looks where they live)");
  t.equal((await store.readStream("secret-1")).length, 40, "the tombstones stay");
  await store.append("secret-1", [{ type: "After", data: {} }]);
  await store.close();
  t.same(await filesHolding(dir, secret), [], "closed: in no file");
  t.same(await filesHolding(dir, kept), ["events.sqlite"], "the kept payloads are in the database");
});

t.test("an append reports the length of each event's data as the JSON text it stored, a retried one too", async (t) => {
  const file = path.join(await tempDir(t), "events.sqlite");
  const store = await openSqliteStore({ path: file });
  const events = [
    { id: randomUUID(), type: "Noted", data: { text: "a short note" } },
    { id: randomUUID(), type: "Noted", data: { text: "x".repeat(5000), nested: { list: [1, 2.5, null, true] } } },
  ];
  const first = await store.append("notes-1", events);
  const retried = await store.append("notes-1", events);
  t.equal(retried.position, first.position, "the retry wrote nothing");
  await store.close();
  const db = new Database(file, { readonly: true });
  t.teardown(() => db.close());
  const stored = db.prepare("SELECT length(data) FROM events WHERE stream_id = 'notes-1' ORDER BY revision").pluck().all() as number[];
  t.same(first.dataLengths, stored, "the lengths of the stored texts");
  t.same(retried.dataLengths, stored, "the same on the retry");
  t.same(
    stored,
    events.map((e) => JSON.stringify(e.data).length),
  );
});
