import { copyFile, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import t from "tap";
import Database from "better-sqlite3";
import { EventSourcedCheckpointSaver } from "../../src/runtime/checkpointer.js";
import { describeThread } from "../../projections/checkpoints.js";
import { allTables, openReadModels, READ_MODELS_FILE } from "../../src/read-models/all.js";
import { openSqliteStore } from "../../src/eventstore/sqlite.js";
import { threadStream } from "../../src/domain/threads.js";
import { repoRoot, startTestServer } from "../support/server.js";
import { gates } from "../support/gates.js";

/** Every row of every table of a read-model database, in primary-key order (positions and fingerprints excluded). */
function dump(file: string): Record<string, unknown[]> {
  const db = new Database(file, { readonly: true });
  try {
    const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name <> 'read_model_meta' ORDER BY name").pluck().all() as string[];
    return Object.fromEntries(tables.map((name) => [name, db.prepare(`SELECT * FROM "${name}" ORDER BY 1, 2`).all()]));
  } finally {
    db.close();
  }
}

async function busyServer(t: { teardown(fn: () => unknown): void }) {
  const srv = await startTestServer();
  const { client } = srv;
  const a = await client.assistants.create({ graphId: "agent", metadata: { v: 1 } });
  await client.assistants.update(a.assistant_id, { metadata: { v: 2 } });
  await client.assistants.setLatest(a.assistant_id, 1);
  const doomed = await client.assistants.create({ graphId: "agent" });
  await client.assistants.delete(doomed.assistant_id);
  const thread = await client.threads.create({ graphId: "agent", metadata: { k: "v" } });
  await client.threads.update(thread.thread_id, { metadata: { k2: 2 } });
  await client.threads.updateState(thread.thread_id, { values: { messages: [{ role: "user", content: "hi" }] }, asNode: "agent" });
  await client.runs.wait(thread.thread_id, "agent", { input: { messages: [{ role: "user", content: "again" }] } });
  await client.runs.wait(null, "agent", { input: { messages: [{ role: "user", content: "stateless" }] } });
  const copy = await client.threads.copy(thread.thread_id);
  const gone = await client.threads.create();
  await client.runs.wait(gone.thread_id, "agent", { input: { messages: [{ role: "user", content: "bye" }] } });
  await client.threads.delete(gone.thread_id);
  t.teardown(() => srv.close());
  return { srv, thread, copy, gone };
}

t.test("a rebuild from position 0 equals the incrementally built read models, row for row", async (t) => {
  const { srv, thread, copy } = await busyServer(t);
  const live = path.join(srv.dataDir, READ_MODELS_FILE);
  const position = srv.server.readModels.runner.position;

  // Checkpoints are not in the read-model database: they are folded per thread on demand. The live
  // server's cached state (built from its own appends) equals a fold of the stream by a fresh saver.
  const refolded = new EventSourcedCheckpointSaver({ store: srv.server.store });
  for (const id of [thread.thread_id, copy.thread_id]) {
    const liveState = describeThread(await (await srv.server.runtime()).checkpointer.cache.get(id));
    t.ok(liveState, `thread ${id} has checkpoints`);
    t.same(describeThread(await refolded.cache.get(id)), liveState, "same checkpoints when folded again");
  }

  const rebuiltDir = await mkdtemp(path.join(os.tmpdir(), "agent-server-rebuild-"));
  t.teardown(() => rm(rebuiltDir, { recursive: true, force: true }));
  const rebuilt = openReadModels(rebuiltDir);
  t.equal(rebuilt.runner.rebuilding, true, "a new database is built from position 0");
  await rebuilt.runner.start(srv.server.store);
  t.equal(rebuilt.runner.position, position, "same position");
  await rebuilt.runner.close();
  const restarted = await srv.restart();
  t.teardown(() => restarted.close());
  await restarted.server.close();
  const a = dump(live);
  const b = dump(path.join(rebuiltDir, READ_MODELS_FILE));
  t.same(b, a, "same rows in every table");
  t.ok(a.assistants.length > 7 && a.threads.length >= 4 && a.runs.length >= 1 && a.threads_metadata.length > 0, "the comparison covers real data");
});

t.test("a deleted thread leaves its runs and values out of the read models", async (t) => {
  const { srv, gone } = await busyServer(t);
  const db = srv.server.readModels.runner.db;
  t.equal(db.prepare("SELECT count(*) FROM runs WHERE thread_id = ?").pluck().get(gone.thread_id), 0, "no runs of the deleted thread");
  t.match(db.prepare('SELECT deleted, "values", metadata FROM threads WHERE thread_id = ?').get(gone.thread_id), { deleted: 1, values: null, metadata: "{}" });
  t.equal(db.prepare("SELECT count(*) FROM threads_metadata WHERE id = ?").pluck().get(gone.thread_id), 0);
  const found = await srv.client.threads.search({ limit: 100 });
  t.notOk(
    found.some((x) => x.thread_id === gone.thread_id),
    "not found by search",
  );
  // …and the log still has everything.
  const events = await srv.server.store.readStream(threadStream(gone.thread_id));
  t.ok(
    events.some((e) => e.type === "RunEnqueued"),
    "the log keeps the thread's history",
  );
  // A stateless run's temporary thread and its run are gone too.
  t.equal(db.prepare("SELECT count(*) FROM runs r JOIN threads th ON th.thread_id = r.thread_id WHERE th.deleted = 1").pluck().get(), 0);
});

t.test("restart after a crash between a log append and its projection resumes from the stored position", async (t) => {
  const srv = await startTestServer();
  t.teardown(() => srv.close());
  const before = await srv.client.threads.create({ metadata: { when: "before" } });
  await srv.server.close();
  // The process died after appending, before its read models saw the event: append to the log alone.
  const store = await openSqliteStore({ path: path.join(srv.dataDir, "events.sqlite"), synchronous: "NORMAL" });
  const id = "0d9a8f63-9b8e-4a52-9b55-2a2a7b7f1f11";
  await store.append(
    threadStream(id),
    [{ type: "ThreadCreated", data: { thread_id: id, metadata: { when: "after" }, created_at: "2026-01-01T00:00:00+00:00" } }],
    "no_stream",
  );
  await store.close();
  const again = await srv.restart();
  t.teardown(() => again.close());
  t.equal(again.server.readModels.runner.rebuilding, false, "resumed, not rebuilt");
  t.match(await again.client.threads.get(id), { thread_id: id, metadata: { when: "after" } });
  t.match(await again.client.threads.get(before.thread_id), { metadata: { when: "before" } });
  t.equal(await again.client.threads.count({ metadata: { when: "after" } }), 1);
});

t.test("a changed schema, a deleted database or a database ahead of the log is rebuilt from the log", async (t) => {
  const srv = await startTestServer();
  t.teardown(() => srv.close());
  const thread = await srv.client.threads.create({ metadata: { keep: true } });
  await srv.server.close();
  const file = path.join(srv.dataDir, READ_MODELS_FILE);
  const db = new Database(file);
  db.prepare("UPDATE read_model_meta SET value = 'an older schema' WHERE key = 'fingerprint'").run();
  db.close();
  let again = await srv.restart();
  t.equal(again.server.readModels.runner.rebuilding, true, "schema change → rebuild");
  t.match(await again.client.threads.get(thread.thread_id), { metadata: { keep: true } });
  await again.server.close();
  await rm(file);
  again = await srv.restart();
  t.equal(again.server.readModels.runner.rebuilding, true, "deleted → rebuild");
  t.match(await again.client.threads.get(thread.thread_id), { metadata: { keep: true } });
  await again.server.close();
  // A database from a longer log (here: another data directory's) is ahead of this log.
  const other = await startTestServer();
  for (let i = 0; i < 5; i++) await other.client.threads.create();
  await other.server.close();
  await copyFile(path.join(other.dataDir, READ_MODELS_FILE), file);
  await rm(file + "-wal", { force: true });
  await other.close();
  again = await srv.restart();
  t.teardown(() => again.close());
  t.equal(again.server.readModels.runner.rebuilding, true, "ahead of the log → rebuild");
  t.equal(await again.client.threads.count({}), 1);
});

t.test("a torn read-model file (a rebuild cut short writes without a WAL) is rebuilt from the log", async (t) => {
  const srv = await startTestServer();
  t.teardown(() => srv.close());
  const threads = [];
  for (let i = 0; i < 50; i++) threads.push(await srv.client.threads.create({ metadata: { i, pad: "x".repeat(500) } }));
  await srv.server.close();
  const file = path.join(srv.dataDir, READ_MODELS_FILE);
  // Every page but the first overwritten: the schema is readable, the tables are not.
  t.equal(await stat(file + "-wal").catch(() => undefined), undefined, "the close left everything in the database file");
  const size = (await stat(file)).size;
  t.ok(size > 16 * 4096, `the database spans enough pages to tear (${size} bytes)`);
  await writeFile(file, (await readFile(file)).fill(0x5a, 4096));
  let again = await srv.restart();
  t.equal(again.server.readModels.runner.rebuilding, true, "torn pages → rebuild");
  t.equal(await again.client.threads.count({}), 50);
  t.match(await again.client.threads.get(threads[49].thread_id), { metadata: { i: 49 } });
  await again.server.close();
  // Not a database at all.
  await writeFile(file, Buffer.alloc(64 * 1024, 0x5a));
  await rm(file + "-wal", { force: true });
  again = await srv.restart();
  t.teardown(() => again.close());
  t.equal(again.server.readModels.runner.rebuilding, true, "not a database → rebuild");
  t.equal(await again.client.threads.count({ metadata: { i: 7 } }), 1);
});

t.test("waitFor resolves only once the position is applied (read-your-writes)", async (t) => {
  const srv = await startTestServer();
  t.teardown(() => srv.close());
  const models = srv.server.readModels.runner;
  const head = models.position;
  let resolved = false;
  const waiting = models.waitFor(head + 1n).then(() => (resolved = true));
  t.equal(resolved, false);
  await srv.client.threads.create();
  await waiting;
  t.equal(resolved, true);
  t.ok(models.position > head);
  t.ok(allTables.length >= 3);
});

t.test("npm run rebuild folds the log into a new database equal to the live one and prints events/s", async (t) => {
  const { srv } = await busyServer(t);
  await srv.server.close();
  const file = path.join(srv.dataDir, READ_MODELS_FILE);
  const before = dump(file);
  const { stdout } = await promisify(execFile)(process.execPath, ["--import", "tsx", "src/read-models/rebuild.ts"], {
    cwd: repoRoot,
    env: { ...process.env, DATA_DIR: srv.dataDir },
  });
  const report = JSON.parse(stdout.trim().split("\n").pop()!) as { rebuild: { events: number; events_per_s: number } };
  t.ok(report.rebuild.events > 20, "folded the log's events");
  t.ok(report.rebuild.events_per_s > 0);
  t.same(dump(file), before, "same rows as the incrementally built database");
});

t.test("headRun names the first run of a live thread's queue, as the folded thread does", async (t) => {
  const srv = await startTestServer();
  t.teardown(() => srv.close());
  const { client } = srv;
  const threads = srv.server.readModels.threads;
  const gate = gates(t);
  const thread = await client.threads.create();
  const id = thread.thread_id;
  const agrees = (label: string) => t.equal(threads.headRun(id), threads.load(id)?.activeRuns[0], label);
  t.equal(threads.headRun(id), undefined, "a new thread has no head run");
  agrees("new thread");
  const first = await client.runs.create(id, "delay", { input: { gate: gate.path("first") } });
  const second = await client.runs.create(id, "agent", { input: { messages: [{ role: "user", content: "next" }] }, multitaskStrategy: "enqueue" });
  t.equal(threads.headRun(id), first.run_id, "the first run heads the queue while the second waits");
  t.same(threads.load(id)?.activeRuns, [first.run_id, second.run_id]);
  agrees("two runs queued");
  gate.open("first");
  await client.runs.join(id, second.run_id);
  t.equal(threads.headRun(id), undefined, "no head once both runs ended");
  agrees("both ended");
  t.equal(threads.headRun("00000000-0000-4000-8000-000000000000"), undefined, "an unknown thread has no head");
  const doomed = await client.threads.create();
  const held = await client.runs.create(doomed.thread_id, "delay", { input: { gate: gate.path("doomed") } });
  t.equal(threads.headRun(doomed.thread_id), held.run_id);
  await client.threads.delete(doomed.thread_id);
  t.equal(threads.headRun(doomed.thread_id), undefined, "a deleted thread has no head run");
});
