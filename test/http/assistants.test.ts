import t from "tap";
import { startTestServer } from "../support/server.js";
import { expectErrors, type ErrorCase } from "../support/http.js";

/** Assistants through the official SDK against the real server. */

const AGENT_DEFAULT = "fe096781-5601-53d2-b2f6-0d3403f7e9ca";
const ISO_WITH_OFFSET = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?\+00:00$/;

t.test("assistants", async (t) => {
  const srv = await startTestServer();
  t.teardown(() => srv.close());
  const { client } = srv;

  t.test("default assistants exist for every graph, with the official ids", async (t) => {
    const found = await client.assistants.search({ graphId: "agent" });
    const def = found.find((a) => a.assistant_id === AGENT_DEFAULT);
    t.ok(def, "agent's default assistant");
    t.same(def!.config, {});
    t.same(def!.metadata, { created_by: "system" });
    t.equal(def!.name, "agent");
    const byGraphId = await client.assistants.get("agent");
    t.equal(byGraphId.assistant_id, AGENT_DEFAULT, "a graph id is accepted where an assistant id is");
    const all = await client.assistants.search({ metadata: { created_by: "system" }, limit: 100 });
    t.same(new Set(all.map((a) => a.graph_id)), new Set(["agent", "error", "delay", "interrupt", "subgraph", "custom", "factory", "store"]));
  });

  t.test("create, get, patch (new version, metadata merged), versions, latest, delete", async (t) => {
    const created = await client.assistants.create({
      graphId: "agent",
      config: { configurable: { model_name: "x" } },
      metadata: { team: "a", n: 1 },
      name: "mine",
      description: "d",
    });
    t.equal(created.graph_id, "agent");
    t.equal(created.version, 1);
    t.same(created.config, { configurable: { model_name: "x" } });
    t.match(created.created_at, ISO_WITH_OFFSET);
    t.match(created.updated_at, ISO_WITH_OFFSET);
    t.same(await client.assistants.get(created.assistant_id), created);

    const patched = await client.assistants.update(created.assistant_id, { metadata: { n: 2, extra: true }, name: "renamed" });
    t.equal(patched.version, 2);
    t.same(patched.metadata, { team: "a", n: 2, extra: true }, "metadata is merged");
    t.equal(patched.name, "renamed");
    t.same(patched.config, created.config, "config kept when not given");

    const versions = await client.assistants.getVersions(created.assistant_id);
    t.same(
      versions.map((v) => v.version),
      [2, 1],
      "newest first",
    );

    const restored = await client.assistants.setLatest(created.assistant_id, 1);
    t.equal(restored.version, 1);
    t.equal(restored.name, "mine");
    t.same(restored.metadata, { team: "a", n: 1 });

    await client.assistants.delete(created.assistant_id);
    await t.rejects(client.assistants.get(created.assistant_id), /404/);
    await t.rejects(client.assistants.setLatest(created.assistant_id, 1), /404/);
  });

  t.test("delete with delete_threads removes the threads the assistant ran on", async (t) => {
    const a = await client.assistants.create({ graphId: "agent" });
    const mine = await client.threads.create({ metadata: { assistant_id: a.assistant_id } });
    const other = await client.threads.create({ metadata: { assistant_id: "someone-else" } });
    await client.assistants.delete(a.assistant_id, { deleteThreads: true });
    await t.rejects(client.threads.get(mine.thread_id), /404/);
    t.ok(await client.threads.get(other.thread_id), "other threads stay");
    const b = await client.assistants.create({ graphId: "agent" });
    const kept = await client.threads.create({ metadata: { assistant_id: b.assistant_id } });
    await client.assistants.delete(b.assistant_id);
    t.ok(await client.threads.get(kept.thread_id), "without delete_threads the threads stay");
  });

  t.test("if_exists raise → 409, do_nothing → the existing one", async (t) => {
    const id = "3f0b3b2e-6f6a-4a40-9b8e-2d1d9a0d0001";
    const first = await client.assistants.create({ graphId: "agent", assistantId: id, name: "one" });
    await t.rejects(client.assistants.create({ graphId: "agent", assistantId: id }), /409/);
    const again = await client.assistants.create({ graphId: "agent", assistantId: id, ifExists: "do_nothing", name: "two" });
    t.same(again, first);
  });

  t.test("search: metadata containment, graph_id, name, sort, paging headers, select; count", async (t) => {
    const tag = `s-${Date.now()}`;
    for (const [i, name] of ["Alpha", "beta", "Gamma"].entries()) {
      await client.assistants.create({ graphId: i === 2 ? "error" : "agent", name, metadata: { tag, i, nested: { k: i % 2 } } });
    }
    const all = await client.assistants.search({ metadata: { tag }, limit: 10 });
    t.equal(all.length, 3);
    t.same(
      all.map((a) => a.name),
      ["Gamma", "beta", "Alpha"],
      "default sort created_at desc",
    );
    const asc = await client.assistants.search({ metadata: { tag }, sortBy: "name", sortOrder: "asc" });
    t.same(
      asc.map((a) => a.name),
      ["Alpha", "Gamma", "beta"],
    );
    t.same(
      (await client.assistants.search({ metadata: { tag, nested: { k: 1 } } })).map((a) => a.name),
      ["beta"],
    );
    t.same(
      (await client.assistants.search({ metadata: { tag }, graphId: "error" })).map((a) => a.name),
      ["Gamma"],
    );
    t.same(
      (await client.assistants.search({ metadata: { tag }, name: "ALP" })).map((a) => a.name),
      ["Alpha"],
      "name is a case-insensitive substring",
    );
    const page = await client.assistants.search({ metadata: { tag }, limit: 2, offset: 0, includePagination: true });
    t.equal(page.assistants.length, 2);
    t.equal(page.next, "2");
    const last = await client.assistants.search({ metadata: { tag }, limit: 2, offset: 2, includePagination: true });
    t.equal(last.assistants.length, 1);
    t.equal(last.next, null);
    const selected = await client.assistants.search({ metadata: { tag }, select: ["assistant_id", "name"], limit: 1 });
    t.same(Object.keys(selected[0]).sort(), ["assistant_id", "name"]);
    t.equal(await client.assistants.count({ metadata: { tag } }), 3);
    t.equal(await client.assistants.count({ metadata: { tag }, graphId: "agent" }), 2);
  });

  t.test("graph, schemas and subgraphs", async (t) => {
    const graph = await client.assistants.getGraph("agent");
    t.ok(
      graph.nodes.some((n) => n.id === "agent"),
      "node agent drawn",
    );
    const schemas = await client.assistants.getSchemas(AGENT_DEFAULT);
    t.equal(schemas.graph_id, "agent");
    t.ok(Object.hasOwn((schemas.state_schema as { properties: object }).properties, "messages"));
    const subgraphs = await client.assistants.getSubgraphs("subgraph");
    t.ok(Object.keys(subgraphs).includes("child"), `namespaces: ${Object.keys(subgraphs)}`);
    const recursive = await client.assistants.getSubgraphs("subgraph", { recurse: true });
    t.ok(
      Object.keys(recursive).some((k) => k.includes("|")),
      "recursion reaches nested subgraphs",
    );
    const one = await client.assistants.getSubgraphs("subgraph", { namespace: "child" });
    t.same(Object.keys(one), ["child"], "one namespace");
    t.ok(one.child.state_schema, "with its schemas");
  });

  t.test("bad input: 404 unknown graph (listing known ones), 422 with field and reason, never 500", async (t) => {
    const unknownGraph = await fetch(`${srv.url}/assistants`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ graph_id: "nope" }),
    });
    t.equal(unknownGraph.status, 404);
    t.match(((await unknownGraph.json()) as { detail: string }).detail, /Graph 'nope' not found. Expected one of: .*"agent"/);

    const cases: ErrorCase[] = [
      ["POST", "/assistants", { graph_id: 42 }, 422, /graph_id/],
      ["POST", "/assistants", {}, 422, /graph_id/],
      ["POST", "/assistants", { graph_id: "agent", bogus: 1 }, 422, /bogus|Unrecognized/],
      ["POST", "/assistants", { graph_id: "agent", assistant_id: "not-a-uuid" }, 422, /assistant_id/],
      ["POST", "/assistants", { graph_id: "agent", config: "x" }, 422, /config/],
      ["POST", "/assistants/search", { limit: 0 }, 422, /limit/],
      ["POST", "/assistants/search", { limit: 1001 }, 422, /limit/],
      ["POST", "/assistants/search", { sort_by: "color" }, 422, /sort_by/],
      ["GET", "/assistants/not-a-uuid-nor-graph", undefined, 422, /assistant_id/],
      ["GET", "/assistants/00000000-0000-4000-8000-000000000000", undefined, 404, /Assistant not found/],
      ["PATCH", "/assistants/00000000-0000-4000-8000-000000000000", { name: "x" }, 404, /not found/],
      ["DELETE", "/assistants/00000000-0000-4000-8000-000000000000", undefined, 404, /not found/],
      ["POST", "/assistants/agent/latest", { version: 99 }, 404, /version not found/],
      ["PATCH", "/assistants/agent", { graph_id: "nope" }, 404, /not found/],
    ];
    await expectErrors(t, srv.url, cases);
    const malformed = await fetch(`${srv.url}/assistants`, { method: "POST", headers: { "content-type": "application/json" }, body: "{not json" });
    t.equal(malformed.status, 422);
    t.match(((await malformed.json()) as { detail: string }).detail, /JSON/);
    const def = await client.assistants.get("agent");
    t.equal(def.version, 1, "rejected requests changed nothing");
  });
});

t.test("assistants survive a restart and default assistants are not duplicated", async (t) => {
  const first = await startTestServer();
  const created = await first.client.assistants.create({ graphId: "agent", name: "durable" });
  const count = await first.client.assistants.count();
  const again = await first.restart();
  t.teardown(() => again.close());
  t.same(await again.client.assistants.get(created.assistant_id), created);
  t.equal(await again.client.assistants.count(), count);
});
