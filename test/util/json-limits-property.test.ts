import t from "tap";
import fc from "fast-check";
import { rm } from "node:fs/promises";
import path from "node:path";
import { startTestServer, type TestServer } from "../support/server.js";
import { REQUEST_LIMITS } from "../../src/util/json-limits.js";
import { FILTER_LIMITS } from "../../src/read-models/json-filter.js";

/**
 * Property: any JSON value the edges accept can be appended, folded, searched and replayed. Values
 * from fast-check (unicode strings, odd numbers, empty containers, chains near the depth limit)
 * go into a thread's metadata and a run's metadata through the real server: each is either refused
 * with a 4xx, or read back equal from the read model, found by a metadata search, shown by the
 * thread's events and replay, and read back equal again after the read models are rebuilt.
 */

const chain = (depth: number, leaf: fc.JsonValue): fc.JsonValue => {
  let value = leaf;
  for (let i = 0; i < depth; i++) value = i % 2 ? [value] : { k: value };
  return value;
};
const depthOf = (value: unknown): number => (typeof value !== "object" || value === null ? 0 : 1 + Math.max(0, ...Object.values(value as object).map(depthOf)));
/** Whether `{v: value}` is a filter a search takes. */
const searchable = (value: unknown) => depthOf(value) + 1 <= FILTER_LIMITS.maxDepth;
/** What a value is after a trip through JSON (-0 becomes 0). */
const asJson = (value: unknown) => JSON.parse(JSON.stringify(value)) as unknown;

const values = fc.oneof(
  { weight: 4, arbitrary: fc.jsonValue({ maxDepth: 4 }) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.integer({ min: REQUEST_LIMITS.maxDepth - 6, max: REQUEST_LIMITS.maxDepth + 4 }), fc.jsonValue({ maxDepth: 1 }))
      .map(([d, leaf]) => chain(d, leaf)),
  },
);

/** A thread as the tests read it (a search answers a list of them). */
type Thread = { thread_id: string };

async function post<T = unknown>(srv: TestServer, route: string, body: unknown) {
  const res = await fetch(srv.url + route, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  return { status: res.status, json: (await res.json()) as T };
}

t.test("a value the edges accept is stored, searched, replayed and rebuilt unchanged; any other is a 4xx", async (t) => {
  let srv = await startTestServer();
  t.teardown(() => srv.close());
  const accepted: { threadId: string; value: unknown; tag: string; metadata: unknown }[] = [];
  let refused = 0;

  await fc.assert(
    fc.asyncProperty(values, async (value) => {
      // The body nests the value two levels down: {"metadata": {"v": value}}.
      const withinLimits = depthOf(value) + 2 <= REQUEST_LIMITS.maxDepth;
      const tag = `t${accepted.length}-${refused}`;
      const created = await post<Thread & { detail: string }>(srv, "/threads", { metadata: { v: value, tag } });
      if (!withinLimits) {
        refused++;
        return created.status === 422 && /nested deeper than/.test(created.json.detail);
      }
      if (created.status !== 200) throw new Error(`refused a value within the limits: ${created.status} ${JSON.stringify(created.json)}`);
      const threadId = created.json.thread_id as string;
      const read = await srv.client.threads.get(threadId);
      t.same(read.metadata, { v: asJson(value), tag }, "read back equal");
      // A filter may nest less deep than a stored value: past FILTER_LIMITS a search is a 422, never a 500.
      const found = await post<Thread[]>(srv, "/threads/search", { metadata: { v: value }, limit: 1000 });
      if (searchable(value)) {
        if (found.status !== 200 || !found.json.some((th) => th.thread_id === threadId)) throw new Error(`search did not find it: ${found.status}`);
      } else if (found.status !== 422) throw new Error(`an unsearchable filter answered ${found.status}`);
      // However deep its value, the thread is found by a search on another key, and so are the others.
      const byTag = await post<Thread[]>(srv, "/threads/search", { metadata: { tag }, limit: 1000 });
      if (byTag.status !== 200 || byTag.json.length !== 1 || byTag.json[0].thread_id !== threadId) throw new Error(`search by tag: ${byTag.status}`);
      const all = await post<Thread[]>(srv, "/threads/search", { limit: 1000 });
      if (all.status !== 200 || all.json.length !== accepted.length + 1) throw new Error(`search of all threads: ${all.status}`);

      const run = await post(srv, `/threads/${threadId}/runs/wait`, {
        assistant_id: "agent",
        input: { messages: [{ role: "user", content: "hi" }] },
        metadata: { v: value },
      });
      if (run.status !== 200) throw new Error(`run refused: ${run.status} ${JSON.stringify(run.json)}`);
      const events = await fetch(`${srv.url}/threads/${threadId}/events?limit=1000`);
      const enqueued = ((await events.json()) as { type: string; data?: { run?: { metadata?: Record<string, unknown> } } }[]).find(
        (e) => e.type === "RunEnqueued",
      );
      t.same(enqueued?.data?.run?.metadata?.v, asJson(value), "the run's metadata is in the thread's events");
      const replay = await fetch(`${srv.url}/threads/${threadId}/replay`);
      if (replay.status !== 200) throw new Error(`replay: ${replay.status}`);
      accepted.push({ threadId, value, tag, metadata: (await srv.client.threads.get(threadId)).metadata });
      return true;
    }),
    { numRuns: 30, seed: 46, endOnFailure: true },
  );
  t.ok(accepted.length > 10, `values were accepted (${accepted.length})`);
  t.ok(refused > 0, `values past the limit were refused (${refused})`);

  // The read models are disposable: a rebuild from the log gives the same answers.
  await srv.server.close();
  await rm(path.join(srv.dataDir, "read-models.sqlite"), { force: true });
  srv = await startTestServer({ dataDir: srv.dataDir });
  for (const { threadId, value, tag, metadata } of accepted) {
    t.same((await srv.client.threads.get(threadId)).metadata, metadata, "equal after a rebuild");
    const found = await post<Thread[]>(srv, "/threads/search", { metadata: searchable(value) ? { v: value } : { tag }, limit: 1000 });
    t.ok(
      found.json.some((th) => th.thread_id === threadId),
      "found after a rebuild",
    );
  }
});
