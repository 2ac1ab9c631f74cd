import t from "tap";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { repoRoot, startTestServer } from "./support/server.js";
import { spawnServer } from "./support/process.js";
import { Client } from "@langchain/langgraph-sdk";

/**
 * Differences the official JS server's own API test suite (libs/langgraph-api/tests/api.test.mts)
 * found when run against this server; each is checked here through the real server and the SDK.
 */

const graphs = path.join(repoRoot, "test", "graphs");

t.test("LANGGRAPH_CONFIG given in langgraph.json's env configures the default assistants", async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), "agent-server-lgconfig-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const config = (env: Record<string, string>) => ({
    graphs: { agent: path.join(graphs, "agent.ts:graph"), context: path.join(graphs, "parity", "context.ts:graph") },
    env,
  });
  const fromFile = JSON.stringify({ agent: { configurable: { model_name: "from-file" } }, context: { context: { model: "from-file" } } });
  await writeFile(path.join(dir, "langgraph.json"), JSON.stringify(config({ LANGGRAPH_CONFIG: fromFile })));

  // The official test graphs set it this way (their langgraph.json's env), not in the environment.
  const env = { LANGGRAPH_JSON: path.join(dir, "langgraph.json"), DATA_DIR: path.join(dir, "data") };
  const server = await spawnServer(env);
  t.teardown(() => void server.child.kill());
  t.ok(server.url, `the server started: ${server.stderr}`);
  const client = new Client({ apiUrl: server.url! });
  const [agent] = await client.assistants.search({ graphId: "agent", metadata: { created_by: "system" } });
  t.same(agent.config, { configurable: { model_name: "from-file" } }, "the default assistant's config");
  const [context] = await client.assistants.search({ graphId: "context", metadata: { created_by: "system" } });
  t.same(context.context, { model: "from-file" }, "the default assistant's context");
  t.same(await client.runs.wait(null, "context", { input: {} }), { model: "from-file" }, "a run of the graph id gets that context");
  server.child.kill();
  await server.exited;

  // A variable set in the environment wins over the file's, as for every variable of `env`.
  const fromEnv = JSON.stringify({ context: { context: { model: "from-env" } } });
  const again = await spawnServer({ ...env, DATA_DIR: path.join(dir, "data-env"), LANGGRAPH_CONFIG: fromEnv });
  t.teardown(() => void again.child.kill());
  t.ok(again.url, `the server started: ${again.stderr}`);
  t.same(await new Client({ apiUrl: again.url! }).runs.wait(null, "context", { input: {} }), { model: "from-env" });
});

t.test("a run's SSE ids count its events from 0, the first run and a resumed subgraph run alike", async (t) => {
  const srv = await startTestServer({ env: { LANGGRAPH_JSON: path.join(graphs, "parity", "langgraph.json") } });
  t.teardown(() => srv.close());
  const client = srv.client;
  const thread = await client.threads.create();
  const ids = (parts: { id?: string }[]) => parts.map((p) => p.id);
  const upTo = (n: number) => Array.from({ length: n }, (_, i) => String(i));
  const collect = async <T>(iter: AsyncIterable<T>) => {
    const out: T[] = [];
    for await (const part of iter) out.push(part);
    return out;
  };

  const first = await collect(client.runs.stream(thread.thread_id, "nested_interrupt", { input: {}, streamMode: "values" }));
  t.same(
    first.map((p) => p.event),
    ["metadata", "values"],
    "metadata, then the input until the interrupt",
  );
  t.same(ids(first), upTo(first.length), "ids 0, 1 as the official server's");
  t.equal((await client.threads.get(thread.thread_id)).status, "interrupted");

  const resumed = await collect(
    client.runs.stream(thread.thread_id, "nested_interrupt", { command: { resume: "Paris" }, streamMode: ["values", "updates"], streamSubgraphs: true }),
  );
  t.ok(
    resumed.some((p) => p.event.startsWith("updates|child:")),
    "subgraph events are streamed",
  );
  t.same(ids(resumed), upTo(resumed.length), "the resumed run's ids start at 0 too");

  // Last-Event-ID is one of those ids: joining after id 0 gives exactly the events after it.
  const runId = (first[0].data as { run_id: string }).run_id;
  const rest = await collect(client.runs.joinStream(thread.thread_id, runId, { lastEventId: "0" }));
  t.same(rest, first.slice(1), "after id 0");
  t.same(await collect(client.runs.joinStream(thread.thread_id, runId, { lastEventId: "-1" })), first, "from the start");
});

t.test("multitask rollback of a run that had started: gone as soon as the rolling-back run is created", async (t) => {
  const srv = await startTestServer();
  t.teardown(() => srv.close());
  const client = srv.client;
  const thread = await client.threads.create();
  const human = (content: string) => ({ role: "human", content });
  const slow = await client.runs.create(thread.thread_id, "delay", { input: { delay: 60_000, messages: [human("first")] } });
  // Started: its first event (metadata) is written with its claim.
  for await (const part of client.runs.joinStream(thread.thread_id, slow.run_id, { lastEventId: "-1" })) if (part.event === "metadata") break;
  t.equal((await client.runs.get(thread.thread_id, slow.run_id)).status, "running");

  const winner = await client.runs.create(thread.thread_id, "agent", { input: { messages: [human("second")] }, multitaskStrategy: "rollback" });
  await t.rejects(client.runs.get(thread.thread_id, slow.run_id), /404/, "the rolled-back run is deleted at once");
  t.same(
    (await client.runs.list(thread.thread_id)).map((r) => r.run_id),
    [winner.run_id],
  );
  await client.runs.join(thread.thread_id, winner.run_id);
  t.equal((await client.runs.get(thread.thread_id, winner.run_id)).status, "success");
  const state = await client.threads.getState<{ messages: { content: string }[] }>(thread.thread_id);
  t.equal(state.values.messages[0].content, "second", "the rolled-back run left nothing in the thread");
  const history = await client.threads.getHistory(thread.thread_id, { limit: 100 });
  t.notOk(
    history.some((s) => s.metadata?.run_id === slow.run_id),
    "nor any checkpoint",
  );
});
