import t from "tap";
import { Client } from "@langchain/langgraph-sdk";
import { TEST_GRAPHS } from "../support/server.js";
import { startEsdbTestDouble } from "../support/esdb-test-double.js";
import { spawnServerOfTest } from "../support/process.js";

/**
 * `Idempotency-Key` on run creation across two server processes on one EventStoreDB (the test double):
 * a retry sent to the other process gets the same run, and another body under the key is a 409 there too.
 */

const input = (content: string) => ({ messages: [{ role: "user", content }] });

async function post(url: string, body: unknown, key: string) {
  const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json", "idempotency-key": key }, body: JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, json: () => JSON.parse(text) as unknown };
}

t.test("two processes on one EventStoreDB: a retry on the other process gets the same run", async (t) => {
  const esdb = await startEsdbTestDouble();
  t.teardown(() => esdb.close());
  const start = async () => {
    const p = await spawnServerOfTest(t, { EVENTSTORE_URL: esdb.connectionString, LANGGRAPH_JSON: TEST_GRAPHS });
    return { url: p.url!, client: new Client({ apiUrl: p.url! }) };
  };
  const a = await start();
  const b = await start();
  const thread = await a.client.threads.create();
  const body = { assistant_id: "agent", input: input("shared") };
  // Both at once: exactly one claim wins; the other waits for its run.
  const [ra, rb] = await Promise.all([
    post(`${a.url}/threads/${thread.thread_id}/runs`, body, "shared-1"),
    post(`${b.url}/threads/${thread.thread_id}/runs`, body, "shared-1"),
  ]);
  t.equal(ra.status, 200);
  t.equal(rb.status, 200);
  const runId = (ra.json() as { run_id: string }).run_id;
  t.equal((rb.json() as { run_id: string }).run_id, runId, "the same run from either process");
  await a.client.runs.join(thread.thread_id, runId);
  t.same(
    (await b.client.runs.list(thread.thread_id)).map((r) => r.run_id),
    [runId],
    "one run",
  );
  t.equal((await post(`${b.url}/threads/${thread.thread_id}/runs`, { ...body, input: input("other") }, "shared-1")).status, 409);
});

t.test("EventStoreDB: a purge of the thread deletes the key's stream; a retry claims it again after its deleted events", async (t) => {
  const esdb = await startEsdbTestDouble();
  t.teardown(() => esdb.close());
  const p = await spawnServerOfTest(t, { EVENTSTORE_URL: esdb.connectionString, LANGGRAPH_JSON: TEST_GRAPHS });
  const client = new Client({ apiUrl: p.url! });
  const thread = await client.threads.create();
  const url = `${p.url!}/threads/${thread.thread_id}/runs`;
  const body = { assistant_id: "agent", input: input("purged") };
  const first = await post(url, body, "purged-1");
  t.equal(first.status, 200);
  const runId = (first.json() as { run_id: string }).run_id;
  await client.runs.join(thread.thread_id, runId);
  t.equal((await fetch(`${p.url!}/threads/${thread.thread_id}?purge=true`, { method: "DELETE" })).status, 204);
  t.equal((await post(url, body, "purged-1")).status, 404, "a retry is a new request, on a thread that is gone");
  // The key's stream reads as nothing now, and its revisions go on after the deleted ones: a claim at no_stream is refused.
  await client.threads.create({ threadId: thread.thread_id });
  const anew = await post(url, body, "purged-1");
  t.equal(anew.status, 200, "on the thread created again under its id, the key creates a run");
  t.not((anew.json() as { run_id: string }).run_id, runId, "a new one");
  await client.runs.join(thread.thread_id, (anew.json() as { run_id: string }).run_id);
});
