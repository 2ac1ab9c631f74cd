import t from "tap";
import { Client } from "@langchain/langgraph-sdk";
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { startTestServer, type TestServer } from "../support/server.js";
import { requestHash } from "../../src/domain/idempotency.js";

/**
 * `Idempotency-Key` on run creation, through the real server: the official SDK (the key as a
 * default header of the client) and raw requests for the forms the SDK does not expose. A retry
 * with the same key and body returns the same run and starts nothing; another body is a 409; the
 * key survives a restart and expires. Across two processes on one EventStoreDB: runs-idempotency-esdb.test.ts.
 */

const input = (content: string) => ({ messages: [{ role: "user", content }] });

function withKey(srv: { url: string }, key: string): Client {
  return new Client({ apiUrl: srv.url, defaultHeaders: { "Idempotency-Key": key } });
}

async function post(url: string, body: unknown, key?: string) {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (key !== undefined) headers["idempotency-key"] = key;
  const res = await fetch(url, { method: "POST", headers, body: JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, location: res.headers.get("content-location"), text, json: () => JSON.parse(text) as unknown };
}

/** Every file of the data directory: the log and its WAL, the read models. */
async function dataDirBytes(dataDir: string): Promise<Buffer> {
  const files = (await readdir(dataDir, { withFileTypes: true })).filter((f) => f.isFile()).map((f) => f.name);
  return Buffer.concat(await Promise.all(files.map((f) => readFile(path.join(dataDir, f)))));
}

/** The run ids a thread has (pending or done): what "starts nothing new" is checked against. */
const runIds = async (srv: TestServer, threadId: string) => (await srv.client.runs.list(threadId, { limit: 100 })).map((r) => r.run_id).sort();

t.test("one server", async (t) => {
  const srv = await startTestServer();
  t.teardown(() => srv.close());

  t.test("POST /threads/{id}/runs: same key and body → the same run; another body → 409; another key → a new run", async (t) => {
    const thread = await srv.client.threads.create();
    const client = withKey(srv, "create-1");
    const first = await client.runs.create(thread.thread_id, "agent", { input: input("hi") });
    const again = await client.runs.create(thread.thread_id, "agent", { input: input("hi") });
    t.equal(again.run_id, first.run_id, "the retry is answered with the same run");
    t.same(again, first, "as it was answered the first time");
    await srv.client.runs.join(thread.thread_id, first.run_id);
    t.same(await runIds(srv, thread.thread_id), [first.run_id], "one run on the thread");
    await t.rejects(client.runs.create(thread.thread_id, "agent", { input: input("something else") }), /HTTP 409/, "same key, different body");
    t.equal((await client.runs.create(thread.thread_id, "agent", { input: input("hi") })).run_id, first.run_id, "still the same run after a conflict");
    const fresh = await withKey(srv, "create-2").runs.create(thread.thread_id, "agent", { input: input("hi") });
    t.not(fresh.run_id, first.run_id, "another key: another run");
    await srv.client.runs.join(thread.thread_id, fresh.run_id);
    t.same(await runIds(srv, thread.thread_id), [first.run_id, fresh.run_id].sort());
    const plain = await srv.client.runs.create(thread.thread_id, "agent", { input: input("hi") });
    t.not(plain.run_id, first.run_id, "without a key, every request is a new run");
    await srv.client.runs.join(thread.thread_id, plain.run_id);
  });

  t.test("keys are per caller and per thread: the same key on another thread is another request (409)", async (t) => {
    const a = await srv.client.threads.create();
    const b = await srv.client.threads.create();
    const client = withKey(srv, "thread-scoped");
    const run = await client.runs.create(a.thread_id, "agent", { input: input("x") });
    await t.rejects(client.runs.create(b.thread_id, "agent", { input: input("x") }), /HTTP 409/);
    await srv.client.runs.join(a.thread_id, run.run_id);
    t.same(await runIds(srv, b.thread_id), [], "nothing started on the other thread");
  });

  t.test("/stream and /wait: a retry follows the same run", async (t) => {
    const thread = await srv.client.threads.create();
    const client = withKey(srv, "stream-1");
    const events = async () => {
      const seen: { event: string; data: unknown }[] = [];
      for await (const chunk of client.runs.stream(thread.thread_id, "agent", { input: input("stream me"), streamMode: "values" })) seen.push(chunk);
      return seen;
    };
    const first = await events();
    const second = await events();
    const runIdOf = (seen: { event: string; data: unknown }[]) => (seen.find((e) => e.event === "metadata")?.data as { run_id: string }).run_id;
    t.equal(runIdOf(second), runIdOf(first), "the same run is streamed");
    t.same(second, first, "with the same events");
    t.same(await runIds(srv, thread.thread_id), [runIdOf(first)]);

    const url = `${srv.url}/threads/${thread.thread_id}/runs/wait`;
    const w1 = await post(url, { assistant_id: "agent", input: input("wait") }, "wait-1");
    const w2 = await post(url, { assistant_id: "agent", input: input("wait") }, "wait-1");
    t.equal(w1.status, 200);
    t.equal(w2.location, w1.location, "Content-Location names the same run");
    t.same(w2.json(), w1.json(), "and the same result");
    t.equal((await runIds(srv, thread.thread_id)).length, 2);
  });

  t.test("stateless runs and batches", async (t) => {
    const body = { assistant_id: "agent", input: input("stateless"), on_completion: "keep" };
    const r1 = await post(`${srv.url}/runs`, body, "stateless-1");
    const r2 = await post(`${srv.url}/runs`, body, "stateless-1");
    t.equal(r1.status, 200);
    const run = r1.json() as { run_id: string; thread_id: string };
    t.equal((r2.json() as { run_id: string }).run_id, run.run_id, "POST /runs: the same run (and no second thread)");
    t.same(await runIds(srv, run.thread_id), [run.run_id]);
    const w1 = await post(`${srv.url}/runs/wait`, { ...body, input: input("stateless wait") }, "stateless-wait");
    const w2 = await post(`${srv.url}/runs/wait`, { ...body, input: input("stateless wait") }, "stateless-wait");
    t.equal(w2.location, w1.location, "POST /runs/wait: the same run");
    t.same(w2.json(), w1.json());
    t.equal((await post(`${srv.url}/runs`, { ...body, input: input("other") }, "stateless-1")).status, 409);

    const batch = [body, { ...body, input: input("second of the batch") }];
    const b1 = await post(`${srv.url}/runs/batch`, batch, "batch-1");
    const b2 = await post(`${srv.url}/runs/batch`, batch, "batch-1");
    const ids = (r: { json: () => unknown }) => (r.json() as { run_id: string }[]).map((x) => x.run_id);
    t.equal(b1.status, 200);
    t.equal(new Set(ids(b1)).size, 2, "two runs in the batch");
    t.same(ids(b2), ids(b1), "the retried batch: the same runs, in order");
    const changed = await post(`${srv.url}/runs/batch`, [body, { ...body, input: input("changed") }], "batch-1");
    t.equal(changed.status, 409, "a batch with another item under the same key");
  });

  t.test("twins at once on one server: one run", async (t) => {
    const thread = await srv.client.threads.create();
    const url = `${srv.url}/threads/${thread.thread_id}/runs`;
    const body = { assistant_id: "agent", input: input("twins") };
    const answers = await Promise.all([1, 2, 3, 4].map(() => post(url, body, "twins-1")));
    t.same(
      answers.map((a) => a.status),
      [200, 200, 200, 200],
    );
    const ids = new Set(answers.map((a) => (a.json() as { run_id: string }).run_id));
    t.equal(ids.size, 1, "every twin got the same run");
    t.same(await runIds(srv, thread.thread_id), [...ids]);
  });

  t.test("bad keys: 422, nothing created", async (t) => {
    const thread = await srv.client.threads.create();
    const url = `${srv.url}/threads/${thread.thread_id}/runs`;
    const long = await post(url, { assistant_id: "agent", input: input("x") }, "k".repeat(256));
    t.equal(long.status, 422);
    t.match(long.json(), { detail: /Idempotency-Key: at most 255 characters/ });
    const spaced = await post(url, { assistant_id: "agent", input: input("x") }, "a key");
    t.equal(spaced.status, 422);
    t.equal((await post(url, { assistant_id: "agent", input: input("x") }, "k".repeat(255))).status, 200, "255 characters are fine");
    t.equal((await runIds(srv, thread.thread_id)).length, 1);
  });

  t.test("a failed creation frees the key: the retry creates the run", async (t) => {
    const missing = "00000000-0000-4000-8000-0000000000aa";
    const url = `${srv.url}/threads/${missing}/runs`;
    const body = { assistant_id: "agent", input: input("x"), if_not_exists: "reject" };
    t.equal((await post(url, body, "fails-first")).status, 404);
    await srv.client.threads.create({ threadId: missing });
    const ok = await post(url, body, "fails-first");
    t.equal(ok.status, 200, "the same key works once the thread exists");
    await srv.client.runs.join(missing, (ok.json() as { run_id: string }).run_id);
  });

  t.test("a deleted thread's run is still the key's answer; a purge of the thread forgets the key and its request's hash", async (t) => {
    const thread = await srv.client.threads.create();
    const url = `${srv.url}/threads/${thread.thread_id}/runs`;
    const body = { assistant_id: "agent", input: input("gone later") };
    const first = await post(url, body, "purged-1");
    t.equal(first.status, 200);
    const run = first.json() as { run_id: string };
    await srv.client.runs.join(thread.thread_id, run.run_id);
    const fingerprint = requestHash(thread.thread_id, body);
    t.ok((await dataDirBytes(srv.dataDir)).includes(fingerprint), "the claim holds the request's hash (no key: in clear)");
    t.equal((await fetch(`${srv.url}/threads/${thread.thread_id}`, { method: "DELETE" })).status, 204);
    const afterDelete = await post(url, body, "purged-1");
    t.equal(afterDelete.status, 200, "the log still holds the run's enqueue");
    t.same(afterDelete.json(), first.json(), "as it was answered the first time");
    t.equal((await fetch(`${srv.url}/threads/${thread.thread_id}?purge=true`, { method: "DELETE" })).status, 204);
    t.notOk((await dataDirBytes(srv.dataDir)).includes(fingerprint), "the request's hash is in no byte of the data directory");
    const afterPurge = await post(url, body, "purged-1");
    t.equal(afterPurge.status, 404, `a retry is a new request, on a thread that is gone: ${afterPurge.text}`);
    await srv.client.threads.create({ threadId: thread.thread_id });
    const anew = await post(url, body, "purged-1");
    t.equal(anew.status, 200, "on the thread created again under its id, the key creates a run");
    t.not((anew.json() as { run_id: string }).run_id, run.run_id, "a new one");
    await srv.client.runs.join(thread.thread_id, (anew.json() as { run_id: string }).run_id);
  });

  t.test("after a restart, the key still answers with its run", async (t) => {
    const thread = await srv.client.threads.create();
    const body = { assistant_id: "agent", input: input("durable") };
    const before = await post(`${srv.url}/threads/${thread.thread_id}/runs`, body, "durable-1");
    const run = before.json() as { run_id: string };
    await srv.client.runs.join(thread.thread_id, run.run_id);
    const restarted = await srv.server.close().then(() => startTestServer({ dataDir: srv.dataDir }));
    t.teardown(() => restarted.close());
    const after = await post(`${restarted.url}/threads/${thread.thread_id}/runs`, body, "durable-1");
    t.equal((after.json() as { run_id: string }).run_id, run.run_id);
    t.same(await runIds(restarted, thread.thread_id), [run.run_id], "nothing new started");
    t.equal((await post(`${restarted.url}/threads/${thread.thread_id}/runs`, { ...body, input: input("x") }, "durable-1")).status, 409);
  });
});

t.test("keys expire after IDEMPOTENCY_KEY_TTL_SECS and can then be used for another request", async (t) => {
  const srv = await startTestServer({ env: { IDEMPOTENCY_KEY_TTL_SECS: "1" } });
  t.teardown(() => srv.close());
  const thread = await srv.client.threads.create();
  const url = `${srv.url}/threads/${thread.thread_id}/runs`;
  // Taken before the first request: the key is recorded after it arrives, so it cannot expire sooner than a TTL after this.
  const started = Date.now();
  const first = await post(url, { assistant_id: "agent", input: input("one") }, "expiring");
  t.equal(first.status, 200);
  // No event marks an expiry: poll until the key takes another body, with a deadline.
  let second = await post(url, { assistant_id: "agent", input: input("two") }, "expiring");
  while (second.status === 409 && Date.now() - started < 10_000) {
    await new Promise((r) => setTimeout(r, 100));
    second = await post(url, { assistant_id: "agent", input: input("two") }, "expiring");
  }
  t.equal(second.status, 200, "reusable once expired");
  t.ok(Date.now() - started >= 1000, "not before the TTL");
  t.not((second.json() as { run_id: string }).run_id, (first.json() as { run_id: string }).run_id);
  for (const id of await runIds(srv, thread.thread_id)) await srv.client.runs.join(thread.thread_id, id);
});
