import t from "tap";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { loadConfig } from "../../src/config.js";
import { startServer } from "../../src/server.js";
import { FakeClock } from "../support/fake-clock.js";
import { READ_MODELS_FILE } from "../../src/read-models/all.js";
import { startTestServer, TEST_GRAPHS } from "../support/server.js";
import { startEsdbTestDouble } from "../support/esdb-test-double.js";

/** Thread TTL with an injected clock; read models rebuilt after a purge; a purge on EventStoreDB. */

type AuditEvent = { type: string; stream: string; metadata: Record<string, unknown>; data: unknown };
const human = (content: string) => ({ role: "user", content });
const json = async <T>(url: string, init?: RequestInit) => (await (await fetch(url, init)).json()) as T;

t.test("thread TTL: one timer at the next expiry; the sweeper purges as the system, deleted threads too", async (t) => {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), "audit-ttl-"));
  const clock = new FakeClock(Date.now());
  const server = await startServer(loadConfig({ LANGGRAPH_JSON: TEST_GRAPHS, LOG_LEVEL: "silent", HOST: "127.0.0.1", PORT: "0", DATA_DIR: dataDir }), {
    clock,
  });
  t.teardown(async () => {
    await server.close();
    await rm(dataDir, { recursive: true, force: true });
  });
  const url = server.url;
  const create = (body: unknown) =>
    json<{ thread_id: string }>(`${url}/threads`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  t.same(clock.pending(), [], "no thread with a TTL: no timer");
  const soon = await create({ ttl: { strategy: "delete", ttl: 5 } });
  const later = await create({ ttl: 30 });
  const keep = await create({});
  // A thread deleted before its TTL runs out: the log keeps its content, which the TTL still erases.
  const marker = `deleted${Date.now()}`;
  const deleted = await create({ ttl: 5, metadata: { note: marker } });
  t.equal((await fetch(`${url}/threads/${deleted.thread_id}`, { method: "DELETE" })).status, 204);
  t.ok(
    JSON.stringify(await json(`${url}/threads/${deleted.thread_id}/events?include_output=true&limit=1000`)).includes(marker),
    "deleted: its history is still in the log",
  );
  await new Promise((resolve) => queueMicrotask(() => resolve(undefined)));
  t.equal(clock.pending().length, 1, "one timer");
  t.ok(Math.abs(clock.pending()[0] - (Date.now() + 5 * 60_000)) < 60_000, "set for the first expiry");

  await clock.advance(6 * 60_000);
  await server.ttlSweeper.sweep();
  t.equal((await fetch(`${url}/threads/${soon.thread_id}`)).status, 404, "expired: gone");
  t.equal((await fetch(`${url}/threads/${later.thread_id}`)).status, 200);
  t.equal((await fetch(`${url}/threads/${keep.thread_id}`)).status, 200);
  for (const expired of [soon, deleted]) {
    const events = await json<AuditEvent[]>(`${url}/threads/${expired.thread_id}/events`);
    t.same([...new Set(events.map((e) => e.type))].sort(), ["EventPurged", "ThreadPurged"], "expired: purged, its events tombstones");
    t.match(
      events.find((e) => e.type === "ThreadPurged"),
      { metadata: { actor: "system", causation_id: "ttl-sweeper" }, data: { purged_by: "system", reason: "thread TTL expired" } },
      "the purge names the sweeper and why",
    );
  }
  t.notOk(
    JSON.stringify(await json(`${url}/threads/${deleted.thread_id}/events?include_output=true&limit=1000`)).includes(marker),
    "the deleted thread's content is gone",
  );
  t.ok(
    Math.abs(server.ttlSweeper.nextSweep ? Date.parse(server.ttlSweeper.nextSweep) - (Date.now() + 30 * 60_000) : Infinity) < 60_000,
    "re-armed for the next one",
  );

  // A PATCH with a TTL moves the expiry.
  await fetch(`${url}/threads/${later.thread_id}`, { method: "PATCH", headers: { "content-type": "application/json" }, body: JSON.stringify({ ttl: 120 }) });
  await new Promise((resolve) => setImmediate(resolve));
  await clock.advance(60 * 60_000);
  await server.ttlSweeper.sweep();
  t.equal((await fetch(`${url}/threads/${later.thread_id}`)).status, 200, "its new TTL has not run out");
});

t.test("SQLite: the read models are rebuilt from a purged log", async (t) => {
  let srv = await startTestServer();
  t.teardown(() => srv.close());
  const purged = await srv.client.threads.create();
  await srv.client.runs.wait(purged.thread_id, "agent", { input: { messages: [human("forget me")] } });
  const kept = await srv.client.threads.create({ metadata: { kept: true } });
  await srv.client.runs.wait(kept.thread_id, "agent", { input: { messages: [human("keep me")] } });
  t.equal((await fetch(`${srv.url}/threads/${purged.thread_id}?purge=true`, { method: "DELETE" })).status, 204);
  await srv.server.close();
  await rm(path.join(srv.dataDir, READ_MODELS_FILE), { force: true });
  srv = await srv.restart();
  t.equal((await fetch(`${srv.url}/threads/${purged.thread_id}`)).status, 404);
  const again = await srv.client.threads.get(kept.thread_id);
  t.same(
    (again.values as { messages: { content: string }[] }).messages.map((m) => m.content),
    ["keep me", "You said: keep me"],
  );
  const [run] = await srv.client.runs.list(kept.thread_id);
  t.equal(run.status, "success");
  const events = await json<AuditEvent[]>(`${srv.url}/threads/${purged.thread_id}/events?limit=1000`);
  t.notOk(JSON.stringify(events).includes("forget me"));
  // The id can be used again: the tombstone's revision is the next command's expected revision.
  const reused = await srv.client.threads.create({ threadId: purged.thread_id });
  t.equal(reused.thread_id, purged.thread_id);
});

t.test("EventStoreDB: a purge deletes the thread's streams", async (t) => {
  const esdb = await startEsdbTestDouble();
  t.teardown(() => esdb.close());
  const srv = await startTestServer({ env: { EVENTSTORE_URL: esdb.connectionString } });
  t.teardown(() => srv.close());
  const thread = await srv.client.threads.create();
  await srv.client.runs.wait(thread.thread_id, "agent", { input: { messages: [human("esdb secret")] } });
  t.equal((await fetch(`${srv.url}/threads/${thread.thread_id}?purge=true`, { method: "DELETE" })).status, 204);
  const events = await json<AuditEvent[]>(`${srv.url}/threads/${thread.thread_id}/events?include_output=true&limit=1000`);
  t.same(
    events.map((e) => e.type),
    ["ThreadPurged"],
    "only the record of the purge is left",
  );
  t.notOk(JSON.stringify(events).includes("esdb secret"));
  t.equal((await fetch(`${srv.url}/threads/${thread.thread_id}`)).status, 404);
  // Another process on the same log folds it from the start: the thread is gone there too.
  const other = await startTestServer({ env: { EVENTSTORE_URL: esdb.connectionString } });
  t.teardown(() => other.close());
  t.equal((await fetch(`${other.url}/threads/${thread.thread_id}`)).status, 404);
});
