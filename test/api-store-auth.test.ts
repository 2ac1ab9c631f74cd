import path from "node:path";
import t from "tap";
import { Client } from "@langchain/langgraph-sdk";
import { repoRoot, startTestServer } from "./support/server.js";

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
  t.same(found.map((i) => [i.namespace, i.value]), [[["alice", "memories"], { who: "alice" }]], "stored under the rewritten namespace");
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
