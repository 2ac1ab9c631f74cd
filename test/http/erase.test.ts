import { randomUUID } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import t from "tap";
import { startTestServer, type TestServer } from "../support/server.js";
import { signToken } from "../auth/jwt.js";

/**
 * `POST /internal/erase` (src/app/erase.ts): a user's threads (metadata.owner) and store items
 * (namespaces whose first label is the user id) are purged, others' stay; under custom auth only
 * the user themself may ask; with encryption at rest what was erased is in no byte of the log.
 */

const AUTH_PROJECT = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "auth", "langgraph.json");
const KEY = "0123456789abcdef0123456789abcdef";
const SCOPES = ["threads:read", "threads:write", "store:read", "store:write", "users:write"];
/** Letters only, so JSON escaping leaves it as it is and a byte scan finds it. */
const marker = (name: string) => `${name}${randomUUID().replaceAll("-", "")}`;

async function call(srv: TestServer, method: string, url: string, token: string | undefined, body?: unknown) {
  const headers: Record<string, string> = {};
  if (token) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(`${srv.url}${url}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, json: text ? (JSON.parse(text) as unknown) : undefined };
}

/** The files of the embedded log (events.sqlite and its WAL). */
async function logBytes(dataDir: string): Promise<Buffer> {
  const files = (await readdir(dataDir)).filter((f) => f.startsWith("events.sqlite"));
  return Buffer.concat(await Promise.all(files.map((f) => readFile(path.join(dataDir, f)))));
}

t.test("custom auth: alice erases herself, bob may not erase her", async (t) => {
  const srv = await startTestServer({ env: { LANGGRAPH_JSON: AUTH_PROJECT, LANGGRAPH_AES_KEY: KEY } });
  t.teardown(() => srv.close());
  const alice = await signToken("alice", SCOPES);
  const bob = await signToken("bob", SCOPES);

  const aliceMarkers: string[] = [];
  const aliceThreads: string[] = [];
  for (let i = 0; i < 2; i++) {
    const m = marker("alicethread");
    aliceMarkers.push(m);
    const created = await call(srv, "POST", "/threads", alice, { metadata: { note: m } });
    t.equal(created.status, 200);
    aliceThreads.push((created.json as { thread_id: string }).thread_id);
  }
  // A deleted (not purged) thread still has content in the log: it is erased too.
  t.equal((await call(srv, "DELETE", `/threads/${aliceThreads[1]}`, alice)).status, 204);
  const bobMarker = marker("bobthread");
  const bobThread = ((await call(srv, "POST", "/threads", bob, { metadata: { note: bobMarker } })).json as { thread_id: string }).thread_id;
  const aliceItem = marker("aliceitem");
  t.equal(
    (await call(srv, "PUT", "/store/items", alice, { namespace: ["alice", "memories"], key: "k1", value: { owner: "alice", note: aliceItem } })).status,
    204,
  );
  t.equal((await call(srv, "PUT", "/store/items", alice, { namespace: ["alice"], key: "k2", value: { owner: "alice", note: aliceItem } })).status, 204);
  t.equal((await call(srv, "PUT", "/store/items", bob, { namespace: ["bob", "memories"], key: "k1", value: { owner: "bob", note: "bobs" } })).status, 204);
  // Metadata not named in LANGGRAPH_AES_JSON_KEYS stays in clear: the scan sees it before the erasure.
  t.ok((await logBytes(srv.dataDir)).includes(aliceMarkers[0]!), "the scan reads the log");

  const bad = await call(srv, "POST", "/internal/erase", alice, { reason: "gdpr" });
  t.equal(bad.status, 422);
  t.match(JSON.stringify(bad.json), /user_id/, "the 422 names the field");

  const bobTries = await call(srv, "POST", "/internal/erase", bob, { user_id: "alice", reason: "spite" });
  t.equal(bobTries.status, 403, "bob may not erase alice");
  t.equal((await call(srv, "GET", `/threads/${aliceThreads[0]}`, alice)).status, 200, "alice's thread is still there");

  const noScope = await call(srv, "POST", "/internal/erase", await signToken("alice", ["threads:read"]), { user_id: "alice", reason: "gdpr" });
  t.equal(noScope.status, 403, "the auth handler refuses a token without users:write");

  const erased = await call(srv, "POST", "/internal/erase", alice, { user_id: "alice", reason: "gdpr request" });
  t.equal(erased.status, 200, JSON.stringify(erased.json));
  t.same(erased.json, { threads: 2, store_items: 2, crons: 0 });

  for (const id of aliceThreads) t.equal((await call(srv, "GET", `/threads/${id}`, alice)).status, 404, "alice's thread is gone");
  t.equal((await call(srv, "GET", "/store/items?namespace=alice.memories&key=k1", alice)).json, null, "alice's item is gone");
  t.equal((await call(srv, "GET", `/threads/${bobThread}`, bob)).status, 200, "bob's thread remains");
  t.match((await call(srv, "GET", "/store/items?namespace=bob.memories&key=k1", bob)).json, { value: { note: "bobs" } }, "bob's item remains");

  const bytes = await logBytes(srv.dataDir);
  for (const m of aliceMarkers) t.notOk(bytes.includes(m), "alice's thread content is in no byte of the log");
  t.ok(bytes.includes(bobMarker), "bob's is");

  t.same(
    (await call(srv, "POST", "/internal/erase", alice, { user_id: "alice", reason: "gdpr request" })).json,
    { threads: 0, store_items: 0, crons: 0 },
    "idempotent",
  );
});

t.test("no custom auth: the operator erases any user; the audit API shows the purge, its actor and reason", async (t) => {
  const srv = await startTestServer({ env: { LANGGRAPH_AES_KEY: KEY } });
  t.teardown(() => srv.close());
  const m = marker("carol");
  const carol = await srv.client.threads.create({ metadata: { owner: "carol", note: m } });
  const dave = await srv.client.threads.create({ metadata: { owner: "dave" } });
  await srv.client.store.putItem(["carol", "memories"], "a", { note: m });
  await srv.client.store.putItem(["dave"], "a", { note: "daves" });
  // Carol's crons, one of them deleted (its payload is still in the log), and dave's on his own thread.
  const [liveCron, deletedCron] = [marker("carolcron"), marker("caroldeletedcron")];
  const every = (input: string, owner: string) => ({ schedule: "0 0 1 1 *", input: { messages: [{ role: "user", content: input }] }, metadata: { owner } });
  const live = await srv.client.crons.create("agent", every(liveCron, "carol"));
  const deleted = await srv.client.crons.create("agent", every(deletedCron, "carol"));
  await srv.client.crons.delete(deleted.cron_id);
  const daves = await srv.client.crons.createForThread(dave.thread_id, "agent", every("davescron", "dave"));
  t.ok((await logBytes(srv.dataDir)).length > 0);

  const erased = await call(srv, "POST", "/internal/erase", undefined, { user_id: "carol", reason: "account closed" });
  t.equal(erased.status, 200);
  t.same(erased.json, { threads: 1, store_items: 1, crons: 2 });
  const crons = await srv.client.crons.search({ limit: 100 });
  t.same(
    crons.map((c) => c.cron_id),
    [daves.cron_id],
    "carol's live cron is gone, dave's remains",
  );
  t.not(live.cron_id, daves.cron_id);
  const log = await logBytes(srv.dataDir);
  t.ok(log.includes(daves.cron_id), "the scan reads the crons' streams");
  for (const m of [liveCron, deletedCron]) t.notOk(log.includes(m), `${m.replace(/[0-9a-f]+$/, "")}: in no byte of the log`);
  t.equal((await call(srv, "GET", `/threads/${carol.thread_id}`, undefined)).status, 404);
  t.equal((await call(srv, "GET", `/threads/${dave.thread_id}`, undefined)).status, 200);
  t.equal(await srv.client.store.getItem(["carol", "memories"], "a"), null);
  t.ok(await srv.client.store.getItem(["dave"], "a"));
  t.notOk((await logBytes(srv.dataDir)).includes(m), "carol's content is in no byte of the log");

  const events = (await call(srv, "GET", `/threads/${carol.thread_id}/events?limit=1000`, undefined)).json as {
    type: string;
    data?: Record<string, unknown>;
  }[];
  const purged = events.find((e) => e.type === "ThreadPurged");
  t.ok(purged, "the audit API shows the thread purged");
  t.match(JSON.stringify(purged), /account closed/, "with the reason");
  t.notOk(JSON.stringify(events).includes(m), "and nothing of its content");

  t.same((await call(srv, "POST", "/internal/erase", undefined, { user_id: "carol", reason: "again" })).json, { threads: 0, store_items: 0, crons: 0 });
});
