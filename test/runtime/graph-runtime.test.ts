import t from "tap";
import path from "node:path";
import { Client } from "@langchain/langgraph-sdk";
import { repoRoot, startTestServer } from "../support/server.js";
import { spawnServer } from "../support/process.js";

/** Graph runtime parity: the SDK's getLogger(), factories made with the config in effect, run metadata on checkpoints. */

const PARITY = path.join(repoRoot, "test", "graphs", "parity", "langgraph.json");

t.test("getLogger() works in a graph, at import time and in a node (lines carry langgraph_node)", async (t) => {
  const proc = await spawnServer({ LANGGRAPH_JSON: PARITY, LOG_LEVEL: "info", DATA_DIR: t.testdir() });
  t.teardown(() => void proc.child.kill("SIGTERM"));
  t.ok(proc.url, `the server started (stderr: ${proc.stderr.slice(0, 300)})`);
  const client = new Client({ apiUrl: proc.url! });
  const result = (await client.runs.wait(null, "logger", { input: {} })) as { said: string };
  t.equal(result.said, "logged");
  const lines = proc.stdout
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  t.ok(
    lines.find((l) => l.msg === "logger graph imported"),
    "the import-time line",
  );
  const inNode = lines.find((l) => l.msg === "hello from a node");
  t.ok(inNode, "the node's line");
  t.equal(inNode?.marker, "parity-logger", "meta fields are merged");
  t.equal(inNode?.langgraph_node, "speak");
  t.equal(inNode?.level, 30, "info");
});

t.test("a factory graph is made with the config in effect (assistant ⊕ thread ⊕ run), also for state reads and updates", async (t) => {
  const srv = await startTestServer({ env: { LANGGRAPH_JSON: PARITY } });
  t.teardown(() => srv.close());
  const client = srv.client;
  const assistant = await client.assistants.create({ graphId: "variant", config: { configurable: { variant: "extended" } } });
  const thread = await client.threads.create();
  // interrupt before `extra`, which only the extended graph has.
  await client.runs.wait(thread.thread_id, assistant.assistant_id, { input: {}, interruptBefore: ["extra"] });
  let state = await client.threads.getState(thread.thread_id);
  t.same(state.next, ["extra"]);
  t.same((state.values as { visited: string[] }).visited, ["base"]);
  // A state update as `extra`: the node exists only in the extended graph.
  await client.threads.updateState(thread.thread_id, { values: { visited: ["by-hand"] }, asNode: "extra" });
  state = await client.threads.getState(thread.thread_id);
  t.same((state.values as { visited: string[] }).visited, ["base", "by-hand"]);
  t.same(state.next, []);

  // The run's own config counts too: the default assistant plus a run config selecting the variant.
  const thread2 = await client.threads.create();
  const values = (await client.runs.wait(thread2.thread_id, "variant", { input: {}, config: { configurable: { variant: "extended" } } })) as {
    visited: string[];
  };
  t.same(values.visited, ["base", "extra"]);
  const plain = (await client.runs.wait(null, "variant", { input: {} })) as { visited: string[] };
  t.same(plain.visited, ["base"]);
});

t.test("run metadata is on the run's checkpoints: history filters by it", async (t) => {
  const srv = await startTestServer({ env: { LANGGRAPH_JSON: PARITY } });
  t.teardown(() => srv.close());
  const client = srv.client;
  const thread = await client.threads.create({ metadata: { owner: "ann" } });
  const first = await client.runs.create(thread.thread_id, "agent", { input: { messages: [{ role: "human", content: "one" }] }, metadata: { batch: "first" } });
  await client.runs.join(thread.thread_id, first.run_id);
  const second = await client.runs.create(thread.thread_id, "agent", {
    input: { messages: [{ role: "human", content: "two" }] },
    metadata: { batch: "second" },
  });
  await client.runs.join(thread.thread_id, second.run_id);

  const firstOnes = await client.threads.getHistory(thread.thread_id, { metadata: { batch: "first" }, limit: 100 });
  t.ok(firstOnes.length > 0, "the first run's checkpoints are found");
  t.ok(firstOnes.every((s) => s.metadata?.batch === "first" && s.metadata?.run_id === first.run_id));
  const secondOnes = await client.threads.getHistory(thread.thread_id, { metadata: { batch: "second" }, limit: 100 });
  t.ok(secondOnes.length > 0 && secondOnes.every((s) => s.metadata?.run_id === second.run_id));
  const byThread = await client.threads.getHistory(thread.thread_id, { metadata: { owner: "ann" }, limit: 100 });
  t.equal(byThread.length, firstOnes.length + secondOnes.length, "thread metadata is merged in as the official server does");
  t.same(await client.threads.getHistory(thread.thread_id, { metadata: { batch: "none" } }), []);
});
