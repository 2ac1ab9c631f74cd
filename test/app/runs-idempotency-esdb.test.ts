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
