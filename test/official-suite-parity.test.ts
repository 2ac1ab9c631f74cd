import t from "tap";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { repoRoot } from "./support/server.js";
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
