import path from "node:path";
import t from "tap";
import { startTestServer, repoRoot } from "../support/server.js";
import { expectErrors } from "../support/http.js";
import { FakeClock } from "../support/fake-clock.js";
import { storeItemStream } from "../../src/domain/store.js";

/** The Store API through the official SDK (`client.store.*`) against the real server. */

const STORE_GRAPHS = path.join(repoRoot, "test", "graphs", "langgraph.store.json");

t.test("store items: put, get, delete, search filters, namespaces, validation", async (t) => {
  const srv = await startTestServer();
  t.teardown(() => srv.close());
  const { client } = srv;

  t.test("put, get (shape), overwrite keeps created_at, delete", async (t) => {
    const put = await fetch(`${srv.url}/store/items`, {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ namespace: ["docs", "a"], key: "k1", value: { title: "one", n: 1 } }),
    });
    t.equal(put.status, 204);
    t.equal(await put.text(), "");
    const res = await fetch(`${srv.url}/store/items?namespace=docs.a&key=k1`);
    t.equal(res.status, 200);
    const wire = (await res.json()) as Record<string, unknown>;
    t.same(Object.keys(wire).sort(), ["created_at", "key", "namespace", "updated_at", "value"]);
    t.same(wire.namespace, ["docs", "a"]);
    t.same(wire.value, { title: "one", n: 1 });
    t.equal(wire.created_at, wire.updated_at);

    await client.store.putItem(["docs", "a"], "k1", { title: "uno", n: 1 });
    const item = await client.store.getItem(["docs", "a"], "k1");
    t.same(item?.value, { title: "uno", n: 1 });
    t.equal(item?.createdAt, wire.created_at, "an overwrite keeps created_at");
    t.ok(String(item?.updatedAt) >= String(wire.updated_at));

    t.equal(await client.store.getItem(["docs", "a"], "missing"), null, "missing item → null");
    const missing = await fetch(`${srv.url}/store/items?namespace=docs.a&key=missing`);
    t.equal(missing.status, 200);
    t.equal(await missing.text(), "null");

    await client.store.deleteItem(["docs", "a"], "k1");
    t.equal(await client.store.getItem(["docs", "a"], "k1"), null);
    await client.store.deleteItem(["docs", "a"], "k1"); // deleting a missing item is fine
  });

  t.test("search: namespace prefix, every filter operator, limit and offset", async (t) => {
    const ns = ["shop", "fruit"];
    const rows = [
      { key: "apple", value: { kind: "fruit", price: 3, color: "red", tags: { sweet: true } } },
      { key: "banana", value: { kind: "fruit", price: 1, color: "yellow", tags: { sweet: true } } },
      { key: "lemon", value: { kind: "fruit", price: 2, color: "yellow", tags: { sweet: false } } },
    ];
    for (const r of rows) await client.store.putItem(ns, r.key, r.value);
    await client.store.putItem(["shop", "veg"], "leek", { kind: "veg", price: 2, color: "green" });
    await client.store.putItem(["shopping"], "list", { kind: "list", price: 9 }); // not under ["shop"]

    const keys = async (prefix: string[], filter?: Record<string, unknown>, extra: { limit?: number; offset?: number } = {}) =>
      (await client.store.searchItems(prefix, { filter, ...extra })).items.map((i) => i.key).sort();

    t.same(await keys(["shop"]), ["apple", "banana", "leek", "lemon"], "prefix is by labels, not characters");
    t.same(await keys(["shop", "fruit"]), ["apple", "banana", "lemon"]);
    t.same(await keys([], { kind: "list" }), ["list"], "empty prefix: everything");
    t.same(await keys(["shop"], { color: "yellow" }), ["banana", "lemon"], "plain value = equality");
    t.same(await keys(["shop"], { color: { $eq: "red" } }), ["apple"]);
    t.same(await keys(["shop"], { color: { $ne: "yellow" } }), ["apple", "leek"]);
    t.same(await keys(["shop"], { price: { $gt: 2 } }), ["apple"]);
    t.same(await keys(["shop"], { price: { $gte: 2 } }), ["apple", "leek", "lemon"]);
    t.same(await keys(["shop"], { price: { $lt: 2 } }), ["banana"]);
    t.same(await keys(["shop"], { price: { $lte: 2 } }), ["banana", "leek", "lemon"]);
    t.same(await keys(["shop"], { price: { $gt: 1, $lt: 3 } }), ["leek", "lemon"], "operators on one field combine");
    t.same(await keys(["shop"], { color: "yellow", price: 1 }), ["banana"], "fields combine");
    t.same(await keys(["shop"], { tags: { sweet: true } }), ["apple", "banana"], "an object value matches by containment");
    t.same(await keys(["shop"], { nope: { $ne: 1 } }), ["apple", "banana", "leek", "lemon"], "$ne holds for a missing field");

    const page1 = (await client.store.searchItems(["shop"], { limit: 2 })).items;
    const page2 = (await client.store.searchItems(["shop"], { limit: 2, offset: 2 })).items;
    t.equal(page1.length, 2);
    t.equal(page2.length, 2);
    t.same([...page1, ...page2].map((i) => i.key).sort(), ["apple", "banana", "leek", "lemon"], "pages do not overlap");
    t.same(
      page1.map((i) => i.key),
      ["leek", "lemon"],
      "most recently updated first",
    );
    const wire = (await (
      await fetch(`${srv.url}/store/items/search`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ namespace_prefix: ["shop", "veg"] }),
      })
    ).json()) as { items: Record<string, unknown>[] };
    t.same(Object.keys(wire.items[0]).sort(), ["created_at", "key", "namespace", "score", "updated_at", "value"]);
    t.equal(wire.items[0].score, null, "no query: no score");
  });

  t.test("list namespaces: prefix, suffix, wildcards, max_depth, limit, offset", async (t) => {
    for (const ns of [["org", "a", "users"], ["org", "a", "teams"], ["org", "b", "users"], ["org", "b", "users", "archive"], ["other"]]) {
      await client.store.putItem(ns, "x", { v: 1 });
    }
    const list = (o: Parameters<typeof client.store.listNamespaces>[0]) => client.store.listNamespaces(o).then((r) => r.namespaces);
    t.same(
      await list({ prefix: ["org"] }),
      [
        ["org", "a", "teams"],
        ["org", "a", "users"],
        ["org", "b", "users"],
        ["org", "b", "users", "archive"],
      ],
      "sorted",
    );
    t.same(await list({ prefix: ["org"], suffix: ["users"] }), [
      ["org", "a", "users"],
      ["org", "b", "users"],
    ]);
    t.same(
      await list({ prefix: ["org", "*", "users"] }),
      [
        ["org", "a", "users"],
        ["org", "b", "users"],
        ["org", "b", "users", "archive"],
      ],
      "* matches one label",
    );
    t.same(await list({ suffix: ["*", "users"], prefix: ["org"] }), [
      ["org", "a", "users"],
      ["org", "b", "users"],
    ]);
    t.same(
      await list({ prefix: ["org"], maxDepth: 2 }),
      [
        ["org", "a"],
        ["org", "b"],
      ],
      "cut to max_depth, distinct",
    );
    t.same(await list({ prefix: ["org"], suffix: ["archive"], maxDepth: 2 }), [["org", "b"]], "suffix before the cut");
    t.same(await list({ prefix: ["other"], maxDepth: 3 }), [["other"]], "shorter namespaces stay as they are");
    t.same(await list({ prefix: ["org"], limit: 2, offset: 1 }), [
      ["org", "a", "users"],
      ["org", "b", "users"],
    ]);
    await client.store.deleteItem(["org", "a", "teams"], "x");
    t.same(await list({ prefix: ["org", "a"] }), [["org", "a", "users"]], "a namespace whose last item was deleted is gone");
  });

  t.test("bad namespaces and bodies → 422 with the official messages", async (t) => {
    await expectErrors(t, srv.url, [
      ["PUT", "/store/items", { namespace: ["a.b"], key: "k", value: {} }, 422, /^Namespace labels cannot be empty or contain periods\. Received: a\.b$/],
      ["PUT", "/store/items", { namespace: ["a", ""], key: "k", value: {} }, 422, /^Namespace labels cannot be empty or contain periods\. Received: a\.$/],
      ["PUT", "/store/items", { namespace: [], key: "k", value: {} }, 422, /^Namespace is required$/],
      ["PUT", "/store/items", { namespace: ["a"], key: "k", value: "text" }, 422, /^body\.value/],
      ["PUT", "/store/items", { namespace: ["a"], key: "k", value: {}, ttl: -1 }, 422, /^body\.ttl/],
      ["PUT", "/store/items", { namespace: ["a"], value: {} }, 422, /^body\.key/],
      ["GET", "/store/items?namespace=a..b&key=k", undefined, 422, /^Namespace labels cannot be empty or contain periods\. Received: a\.\.b$/],
      ["GET", "/store/items?namespace=a", undefined, 422, /^querystring\.key/],
      ["DELETE", "/store/items", { namespace: ["x.y"], key: "k" }, 422, /Received: x\.y$/],
      ["POST", "/store/items/search", { namespace_prefix: ["a", ""] }, 422, /^Namespace labels cannot be empty/],
      ["POST", "/store/items/search", { filter: { price: { $in: [1] } } }, 422, /^filter\.price: unsupported operator \$in/],
      ["POST", "/store/items/search", { filter: { price: { $gt: {} } } }, 422, /^filter\.price\.\$gt: expected a number or a string/],
      ["POST", "/store/items/search", { limit: 0 }, 422, /^body\.limit/],
      ["POST", "/store/namespaces", { prefix: ["a.b"] }, 422, /Received: a\.b$/],
      ["POST", "/store/namespaces", { max_depth: 0 }, 422, /^body\.max_depth/],
    ]);
    await t.rejects(client.store.putItem(["a", ""], "k", {}), /HTTP 422: .*Namespace labels cannot be empty/, "the SDK sees the 422");
  });

  t.test("/internal/truncate is not served outside development mode", async (t) => {
    const res = await fetch(`${srv.url}/internal/truncate`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ store: true }),
    });
    t.equal(res.status, 404);
  });
});

t.test("TTL: expiry under an injected clock, refresh on read, swept as events", async (t) => {
  const clock = new FakeClock();
  const srv = await startTestServer({ deps: { clock } });
  t.teardown(() => srv.close());
  const { client } = srv;

  await client.store.putItem(["ttl"], "short", { v: 1 }, { ttl: 1 });
  await client.store.putItem(["ttl"], "long", { v: 2 }, { ttl: 10 });
  await client.store.putItem(["ttl"], "forever", { v: 3 });
  t.equal(clock.pending().length, 1, "one timer, set to the earliest expiry");

  await clock.advance(30_000);
  t.ok(await client.store.getItem(["ttl"], "short", { refreshTtl: false }), "still there at 30 s");
  await client.store.getItem(["ttl"], "long"); // refresh_on_read: the 10 minutes start again now

  await clock.advance(31_000); // 61 s: "short" is due and swept
  t.equal(await client.store.getItem(["ttl"], "short"), null);
  const events = await srv.server.store.readStream(storeItemStream(["ttl"], "short"));
  t.same(
    events.map((e) => e.type),
    ["StoreItemPut", "StoreItemExpired"],
    "the expiry is an event of the item's stream",
  );

  // Between its expiry and the sweep an item is already hidden.
  await clock.advance(9 * 60_000); // 10 min 1 s after the start; "long" was refreshed at 30 s
  t.ok(await client.store.getItem(["ttl"], "long", { refreshTtl: false }), "a refreshed item lives on");
  await client.store.searchItems(["ttl"], { refreshTtl: true }); // refreshes "long" again (at 10:01)
  await clock.advance(10 * 60_000 - 1);
  t.same((await client.store.searchItems(["ttl"], { refreshTtl: false })).items.map((i) => i.key).sort(), ["forever", "long"]);
  await clock.advance(1);
  t.same(
    (await client.store.searchItems(["ttl"])).items.map((i) => i.key),
    ["forever"],
    "expired by the refreshed time",
  );
  t.same((await client.store.listNamespaces({ prefix: ["ttl"] })).namespaces, [["ttl"]]);
  const long = await srv.server.store.readStream(storeItemStream(["ttl"], "long"));
  t.same(
    long.map((e) => e.type),
    ["StoreItemPut", "StoreItemTtlRefreshed", "StoreItemTtlRefreshed", "StoreItemExpired"],
  );
  t.equal(clock.pending().length, 0, "nothing left to expire: no timer");

  t.test("a restart re-arms the timer from the read model", async (t) => {
    await client.store.putItem(["ttl"], "again", { v: 4 }, { ttl: 2 });
    const restarted = await srv.restart();
    t.teardown(() => restarted.close());
    t.ok(await restarted.client.store.getItem(["ttl"], "again", { refreshTtl: false }));
    await clock.advance(2 * 60_000);
    t.equal(await restarted.client.store.getItem(["ttl"], "again"), null);
    const again = await restarted.server.store.readStream(storeItemStream(["ttl"], "again"));
    t.equal(again.at(-1)?.type, "StoreItemExpired");
  });
});

t.test("semantic search with store.index and an offline embedding function; a graph reads and writes the store", async (t) => {
  const srv = await startTestServer({ env: { LANGGRAPH_JSON: STORE_GRAPHS, LANGGRAPH_DEV: "true" } });
  t.teardown(() => srv.close());
  const { client } = srv;

  t.test("query ranks by cosine similarity and results carry score", async (t) => {
    await client.store.putItem(["pets"], "a", { text: "my cat and another cat", kind: "pet" });
    await client.store.putItem(["pets"], "b", { text: "a dog with a fish", kind: "pet" });
    await client.store.putItem(["pets"], "c", { text: "a bird", kind: "pet" });
    await client.store.putItem(["pets"], "d", { text: "cat cat cat", kind: "pet" }, { index: false });
    const found = (await client.store.searchItems(["pets"], { query: "cats" })).items;
    t.same(
      found.map((i) => i.key),
      ["a", "c", "b", "d"],
      "best first; ties by most recent update; unscored last",
    );
    t.equal((found[0] as { score?: number }).score, 1);
    t.equal((found.find((i) => i.key === "b") as { score?: number }).score, 0);
    t.equal(found.at(-1)?.key, "d", "an item put with index: false has no vector: last");
    t.equal((found.at(-1) as { score?: number | null }).score, null);
    const dogs = (await client.store.searchItems(["pets"], { query: "dog", filter: { kind: "pet" }, limit: 1 })).items;
    t.same(
      dogs.map((i) => i.key),
      ["b"],
      "filters and limit apply to the ranking",
    );
    t.ok(Math.abs(((dogs[0] as { score?: number }).score ?? 0) - Math.SQRT1_2) < 1e-6, "cosine of (1 dog) and (1 dog, 1 fish)");
    await client.store.putItem(["pets"], "e", { text: "plane", other: "dog dog" }, { index: ["other"] });
    t.equal((await client.store.searchItems(["pets"], { query: "dog", limit: 1 })).items[0].key, "e", "a put's own index fields");
  });

  t.test("a graph's nodes reach the store through config.store, getStore() and the runtime; writes are attributed to the run", async (t) => {
    await client.store.putItem(["memories", "u1"], "profile", { name: "Ann" });
    const thread = await client.threads.create();
    const run = await client.runs.create(thread.thread_id, "store", { input: { user: "u1", note: "hello" } });
    await client.runs.join(thread.thread_id, run.run_id);
    const state = await client.threads.getState(thread.thread_id);
    t.match(state.values, { profile: "Ann", seen: "hello", count: 2, same: true });
    const last = await client.store.getItem(["memories", "u1"], "last");
    t.same(last?.value, { note: "hello" }, "a client reads what the graph wrote");
    const events = await srv.server.store.readStream(storeItemStream(["memories", "u1"], "last"));
    t.equal(events[0].type, "StoreItemPut");
    t.match(events[0].data, { run_id: run.run_id, thread_id: thread.thread_id });
  });

  t.test("POST /internal/truncate in development mode appends deletions", async (t) => {
    const thread = await client.threads.create();
    await client.runs.wait(thread.thread_id, "store", { input: { user: "u2", note: "bye" } });
    const assistant = await client.assistants.create({ graphId: "store" });
    const res = await fetch(`${srv.url}/internal/truncate`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ runs: true, threads: true, assistants: true, checkpointer: true, store: true }),
    });
    t.equal(res.status, 200);
    t.same(await res.json(), { ok: true });
    t.same((await client.store.searchItems([])).items, [], "no store items");
    t.same(await client.threads.search(), [], "no threads");
    await t.rejects(client.assistants.get(assistant.assistant_id), /404/);
    t.equal((await client.assistants.search()).length, 1, "the system assistant stays");
    const deleted = await srv.server.store.readStream(storeItemStream(["memories", "u2"], "last"));
    t.match(deleted.at(-1), { type: "StoreItemDeleted", data: { reason: "truncate" } });
    const restarted = await srv.restart();
    t.teardown(() => restarted.close());
    t.same((await restarted.client.store.searchItems([])).items, [], "a restart folds the same log");
  });
});

t.test("http.disable_store removes the store routes", async (t) => {
  const srv = await startTestServer({ env: { LANGGRAPH_JSON: path.join(repoRoot, "test", "graphs", "langgraph.nostore.json") } });
  t.teardown(() => srv.close());
  await t.rejects(srv.client.store.putItem(["a"], "k", {}), /HTTP 404/);
  const res = await fetch(`${srv.url}/store/namespaces`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
  t.equal(res.status, 404);
});
