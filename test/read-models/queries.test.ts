import t from "tap";
import { jsonContains } from "../../src/domain/json.js";
import { startTestServer } from "../support/server.js";

/**
 * Search and count answer from SQL over the read-model tables: every filter, sort and page gives
 * what filtering, sorting and slicing the whole collection in memory gives (the reference here).
 */
t.test("thread search and count by every filter agree with a reference over all threads", async (t) => {
  const srv = await startTestServer();
  t.teardown(() => srv.close());
  const { client } = srv;
  const tag = `q-${Date.now()}`;
  const metas = [
    { tag, user: "ada", n: 1, flag: true, nested: { team: "a", tags: ["x", "y"] } },
    { tag, user: "bob", n: 2, flag: false, nested: { team: "b", tags: ["y"] } },
    { tag, user: "ada", n: 3, nested: { team: "b", tags: [] } },
    { tag, user: "cy", n: "3", flag: true },
    { tag, user: null, n: 1.5 },
  ];
  for (const metadata of metas) await client.threads.create({ metadata });
  // Two threads get values (a run), one of them is then interrupted by state: different statuses and values.
  const all0 = await client.threads.search({ metadata: { tag }, limit: 100 });
  await client.runs.wait(all0[0].thread_id, "agent", { input: { messages: [{ role: "user", content: "hello" }] } });
  await client.runs.wait(all0[1].thread_id, "agent", { input: { messages: [{ role: "user", content: "other" }] } });
  const all = await client.threads.search({ metadata: { tag }, limit: 100 });
  t.equal(all.length, metas.length);

  const filters: Record<string, unknown>[] = [
    {},
    { user: "ada" },
    { user: null },
    { n: 3 },
    { n: "3" },
    { flag: true },
    { flag: false },
    { nested: { team: "b" } },
    { nested: { tags: ["y"] } },
    { nested: { tags: ["x", "y"] } },
    { user: "ada", nested: { team: "a" } },
    { user: "nobody" },
    { missing: 1 },
  ];
  for (const f of filters) {
    const metadata = { tag, ...f };
    const want = all
      .filter((x) => jsonContains(x.metadata, metadata))
      .map((x) => x.thread_id)
      .sort();
    const got = (await client.threads.search({ metadata, limit: 100 })).map((x) => x.thread_id).sort();
    t.same(got, want, `metadata ${JSON.stringify(f)}`);
    t.equal(await client.threads.count({ metadata }), want.length, `count ${JSON.stringify(f)}`);
  }
  for (const values of [{ messages: [{ content: "hello" }] }, { messages: [{ type: "ai" }] }, { nothing: 1 }]) {
    const want = all
      .filter((x) => jsonContains(x.values, values))
      .map((x) => x.thread_id)
      .sort();
    t.same((await client.threads.search({ metadata: { tag }, values, limit: 100 })).map((x) => x.thread_id).sort(), want, `values ${JSON.stringify(values)}`);
  }
  for (const status of ["idle", "busy", "interrupted", "error"] as const) {
    const want = all.filter((x) => x.status === status).length;
    t.equal((await client.threads.search({ metadata: { tag }, status, limit: 100 })).length, want, `status ${status}`);
    t.equal(await client.threads.count({ metadata: { tag }, status }), want);
  }
  const ids = [all[1].thread_id, all[3].thread_id];
  t.same((await client.threads.search({ ids, limit: 100 })).map((x) => x.thread_id).sort(), [...ids].sort(), "ids");
  for (const sortBy of ["thread_id", "status", "created_at", "updated_at", "state_updated_at"] as const) {
    for (const sortOrder of ["asc", "desc"] as const) {
      const key = (x: (typeof all)[number]) => String((x as unknown as Record<string, unknown>)[sortBy]);
      const want = [...all].sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : a.thread_id < b.thread_id ? -1 : 1));
      if (sortOrder === "desc") want.reverse();
      const got = await client.threads.search({ metadata: { tag }, sortBy, sortOrder, limit: 100 });
      t.same(got.map(key), want.map(key), `sorted by ${sortBy} ${sortOrder}`);
      const page = await client.threads.search({ metadata: { tag }, sortBy, sortOrder, limit: 2, offset: 2 });
      t.same(
        page.map((x) => x.thread_id),
        got.slice(2, 4).map((x) => x.thread_id),
        `page of ${sortBy} ${sortOrder}`,
      );
    }
  }
  const res = await fetch(`${srv.url}/threads/search`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ metadata: { tag }, limit: 2, offset: 1 }),
  });
  t.equal(res.headers.get("x-pagination-total"), String(metas.length), "X-Pagination-Total is the count of all matches");
  t.equal(res.headers.get("x-pagination-next"), "3");
});

t.test("assistant search and count by every filter; runs listed by status", async (t) => {
  const srv = await startTestServer();
  t.teardown(() => srv.close());
  const { client } = srv;
  const tag = `a-${Date.now()}`;
  const made = [];
  for (const [graphId, name, extra] of [
    ["agent", "Alpha one", { k: 1 }],
    ["agent", "beta", { k: 2 }],
    ["error", "Gamma", { k: 1, deep: { x: [1, 2] } }],
  ] as const) {
    made.push(await client.assistants.create({ graphId, name, metadata: { tag, ...extra } }));
  }
  const cases: [Parameters<typeof client.assistants.search>[0], string[]][] = [
    [{ metadata: { tag } }, ["Alpha one", "beta", "Gamma"]],
    [{ metadata: { tag, k: 1 } }, ["Alpha one", "Gamma"]],
    [{ metadata: { tag, deep: { x: [2] } } }, ["Gamma"]],
    [{ metadata: { tag }, graphId: "agent" }, ["Alpha one", "beta"]],
    [{ metadata: { tag }, name: "ONE" }, ["Alpha one"]],
    [{ metadata: { tag }, graphId: "error", name: "gam" }, ["Gamma"]],
  ];
  for (const [query, names] of cases) {
    t.same((await client.assistants.search({ ...query, limit: 100 })).map((a) => a.name).sort(), [...names].sort(), JSON.stringify(query));
    t.equal(await client.assistants.count({ metadata: query!.metadata, graphId: query!.graphId, name: query!.name }), names.length);
  }
  for (const sortBy of ["assistant_id", "graph_id", "name", "created_at", "updated_at"] as const) {
    const got = await client.assistants.search({ metadata: { tag }, sortBy, sortOrder: "asc", limit: 100 });
    const keys = got.map((a) => String((a as unknown as Record<string, unknown>)[sortBy]));
    t.same(keys, [...keys].sort(), `sorted by ${sortBy}`);
  }

  const thread = await client.threads.create();
  const done = await client.runs.create(thread.thread_id, "agent", { input: { messages: [{ role: "user", content: "a" }] } });
  await client.runs.join(thread.thread_id, done.run_id);
  const later = await client.runs.create(thread.thread_id, "agent", { input: { messages: [] }, afterSeconds: 3600 });
  t.same(
    (await client.runs.list(thread.thread_id)).map((r) => r.run_id),
    [later.run_id, done.run_id],
    "newest first",
  );
  t.same(
    (await client.runs.list(thread.thread_id, { status: "pending" })).map((r) => r.run_id),
    [later.run_id],
  );
  t.same(
    (await client.runs.list(thread.thread_id, { status: "success" })).map((r) => r.run_id),
    [done.run_id],
  );
  t.same(
    (await client.runs.list(thread.thread_id, { limit: 1, offset: 1 })).map((r) => r.run_id),
    [done.run_id],
  );
  await client.runs.cancel(thread.thread_id, later.run_id);
  t.equal((await client.runs.list(thread.thread_id, { status: "pending" })).length, 0);
});
