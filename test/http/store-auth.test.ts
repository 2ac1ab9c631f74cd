import path from "node:path";
import t from "tap";
import { Client } from "@langchain/langgraph-sdk";
import { repoRoot, startTestServer } from "../support/server.js";

/**
 * Store items per user through the custom-auth `store` handlers (test/auth/store-auth.ts): the
 * handler rewrites every namespace to start with the user's identity, as the official docs show.
 */

const PROJECT = path.join(repoRoot, "test", "auth", "store-langgraph.json");

t.test("store:* handlers scope every store operation to the user", async (t) => {
  const srv = await startTestServer({ env: { LANGGRAPH_JSON: PROJECT } });
  t.teardown(() => srv.close());
  const as = (user: string) => new Client({ apiUrl: srv.url, defaultHeaders: { "x-user": user } });
  const alice = as("alice");
  const bob = as("bob");

  await alice.store.putItem(["memories"], "m", { who: "alice" });
  await bob.store.putItem(["memories"], "m", { who: "bob" });

  t.same((await alice.store.getItem(["memories"], "m"))?.value, { who: "alice" });
  t.same((await bob.store.getItem(["memories"], "m"))?.value, { who: "bob" });
  const found = (await alice.store.searchItems(["memories"])).items;
  t.same(
    found.map((i) => [i.namespace, i.value]),
    [[["alice", "memories"], { who: "alice" }]],
    "stored under the rewritten namespace",
  );
  t.same((await alice.store.searchItems([])).items.length, 1, "an empty prefix is the user's own namespace");
  t.same((await bob.store.listNamespaces()).namespaces, [["bob", "memories"]]);

  await bob.store.deleteItem(["memories"], "m");
  t.equal(await bob.store.getItem(["memories"], "m"), null);
  t.same((await alice.store.getItem(["memories"], "m"))?.value, { who: "alice" }, "bob's delete does not reach alice's item");

  await t.rejects(as("reader").store.putItem(["memories"], "m", { who: "reader" }), /HTTP 403/);
  t.same((await as("reader").store.searchItems([])).items, [], "a read-only user reads their own (empty) namespace");
  const anonymous = await fetch(`${srv.url}/store/items/search`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
  t.equal(anonymous.status, 401);
});

t.test("store filters returned by a handler are applied to every item: search, namespaces, get, put, delete", async (t) => {
  const srv = await startTestServer({ env: { LANGGRAPH_JSON: path.join(repoRoot, "test", "auth", "store-filter-langgraph.json") } });
  t.teardown(() => srv.close());
  const as = (user: string) => new Client({ apiUrl: srv.url, defaultHeaders: { "x-user": user } });
  const alice = as("alice");
  const bob = as("bob");

  // Interleaved so that a filter applied after LIMIT/OFFSET would show fewer (or other) items.
  for (let i = 0; i < 4; i++) {
    await alice.store.putItem(["alice", "notes"], `a${i}`, { n: i });
    await bob.store.putItem(["bob", "notes"], `b${i}`, { n: i });
  }
  await bob.store.putItem(["team", "bob"], "t", { n: 9 });

  const keys = async (client: Client, prefix: string[], options: { limit?: number; offset?: number } = {}) =>
    (await client.store.searchItems(prefix, options)).items.map((i) => i.key).sort();
  t.same(await keys(alice, []), ["a0", "a1", "a2", "a3"], "searchItems([]): only alice's items");
  t.same(await keys(bob, []), ["b0", "b1", "b2", "b3", "t"], "bob's, in any namespace holding his identity");
  t.same(await keys(alice, ["bob"]), [], "a prefix naming someone else: nothing");
  const paged = [...(await keys(alice, [], { limit: 2, offset: 0 })), ...(await keys(alice, [], { limit: 2, offset: 2 }))].sort();
  t.same(paged, ["a0", "a1", "a2", "a3"], "limit and offset count the caller's items only");
  t.equal((await alice.store.searchItems([], { limit: 3, offset: 1 })).items.length, 3, "a full page of the caller's items");

  t.same((await alice.store.listNamespaces()).namespaces, [["alice", "notes"]], "listNamespaces({}): only alice's");
  t.same((await bob.store.listNamespaces()).namespaces, [
    ["bob", "notes"],
    ["team", "bob"],
  ]);
  t.same((await bob.store.listNamespaces({ maxDepth: 1 })).namespaces, [["bob"]], "cut to max_depth, then filtered: [team] does not hold bob");
  t.same((await bob.store.listNamespaces({ limit: 1, offset: 1 })).namespaces, [["team", "bob"]], "paging over the caller's namespaces");

  t.same((await alice.store.getItem(["alice", "notes"], "a1"))?.value, { n: 1 });
  await t.rejects(alice.store.getItem(["bob", "notes"], "b1"), /HTTP 404/, "someone else's item is not found");
  await t.rejects(alice.store.putItem(["bob", "notes"], "b1", { n: "overwritten" }), /HTTP 404/, "nor overwritten");
  await t.rejects(alice.store.putItem(["shared"], "x", { n: 0 }), /HTTP 403/, "a new item the filters would hide: refused");
  await t.rejects(alice.store.deleteItem(["bob", "notes"], "b1"), /HTTP 404/, "nor deleted");
  await t.rejects(alice.store.deleteItem(["shared"], "nothing"), /HTTP 403/);
  t.same((await bob.store.getItem(["bob", "notes"], "b1"))?.value, { n: 1 }, "bob's item untouched");
  await alice.store.deleteItem(["alice", "notes"], "a0");
  t.same(await keys(alice, []), ["a1", "a2", "a3"], "the owner deletes their own");

  // A filter on a field of the value (the official server matches value, namespace and key alike).
  const tagged = as("tagged");
  await t.rejects(tagged.store.putItem(["any"], "k", { owner: "someone" }), /HTTP 403/);
  await tagged.store.putItem(["any"], "k", { owner: "tagged", text: "mine" });
  t.same(
    (await tagged.store.searchItems([])).items.map((i) => i.value),
    [{ owner: "tagged", text: "mine" }],
    "matched on the value's owner",
  );
  t.same((await alice.store.searchItems([])).items.length, 3, "alice still sees only her own");
});
