import t from "tap";
import { Client } from "@langchain/langgraph-sdk";
import { startEsdbTestDouble } from "../support/esdb-test-double.js";
import { spawnServerOfTest } from "../support/process.js";
import { TEST_GRAPHS } from "../support/server.js";

/**
 * Behind a load balancer a client may write through one process and read through another. Each
 * process keeps its own read models (its own DATA_DIR) on one EventStoreDB (the test double).
 */
t.test("read-your-writes across two processes on one EventStoreDB", async (t) => {
  const esdb = await startEsdbTestDouble();
  t.teardown(() => esdb.close());
  const start = async () => (await spawnServerOfTest(t, { EVENTSTORE_URL: esdb.connectionString, LANGGRAPH_JSON: TEST_GRAPHS })).url!;
  const [a, b] = [await start(), await start()];
  const json = async (url: string, init: RequestInit = {}) => {
    const res = await fetch(url, { ...init, headers: { "content-type": "application/json", ...init.headers } });
    return { res, body: res.status === 204 ? undefined : await res.json() };
  };

  const tag = `t-${Date.now()}`;
  const created = await json(`${a}/threads`, { method: "POST", body: JSON.stringify({ metadata: { tag } }) });
  t.equal(created.res.status, 200);
  const position = created.res.headers.get("x-log-position");
  t.match(position, /^\d+$/, "a write answers with its log position");
  const id = (created.body as { thread_id: string }).thread_id;

  // A get by id that misses locally reads the thread's own stream before answering 404.
  const got = await json(`${b}/threads/${id}`);
  t.equal(got.res.status, 200, "the other process finds the thread at once");
  t.match(got.body, { thread_id: id, metadata: { tag } });

  // A search has no stream to check: the client sends the position back and the read waits for it.
  const tag2 = `${tag}-2`;
  const second = await json(`${a}/threads`, { method: "POST", body: JSON.stringify({ metadata: { tag: tag2 } }) });
  const found = await json(`${b}/threads/search`, {
    method: "POST",
    headers: { "x-log-position": second.res.headers.get("x-log-position")! },
    body: JSON.stringify({ metadata: { tag: tag2 } }),
  });
  t.equal((found.body as unknown[]).length, 1, "the search on the other process sees the write");
  const count = await json(`${b}/threads/count`, {
    method: "POST",
    headers: { "x-log-position": second.res.headers.get("x-log-position")! },
    body: JSON.stringify({ metadata: { tag: tag2 } }),
  });
  t.equal(count.body, 1);

  // Assistants and runs: written through one process, read through the other.
  const assistant = await json(`${a}/assistants`, { method: "POST", body: JSON.stringify({ graph_id: "agent", name: "cross" }) });
  t.equal((await json(`${b}/assistants/${(assistant.body as { assistant_id: string }).assistant_id}`)).res.status, 200);
  const client = new Client({ apiUrl: a });
  const run = await client.runs.create(id, "agent", { input: { messages: [{ role: "user", content: "hi" }] } });
  const fromB = await json(`${b}/threads/${id}/runs/${run.run_id}`);
  t.equal(fromB.res.status, 200, "the run is found through the other process");
  t.equal(await new Client({ apiUrl: b }).runs.join(id, run.run_id).then((v) => (v as { messages: unknown[] }).messages.length), 2);

  // Bad input: a clear 422, and an unknown id is still 404 after the stream check.
  const bad = await json(`${b}/threads/${id}`, { headers: { "x-log-position": "yesterday" } });
  t.equal(bad.res.status, 422);
  t.match(bad.body, { detail: /X-Log-Position/ });
  t.equal((await json(`${b}/threads/00000000-0000-4000-8000-000000000000`)).res.status, 404);
});
