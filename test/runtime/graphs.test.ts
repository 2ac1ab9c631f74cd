import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { AIMessage, type BaseMessage, HumanMessage } from "@langchain/core/messages";
import { Annotation, Command, MemorySaver, MessagesAnnotation, MessagesValue, START, StateGraph, StateSchema } from "@langchain/langgraph";
import { z } from "zod";
import t from "tap";
import { TypeSchemaReader } from "../../src/runtime/type-schemas/reader.js";
import { UiBundleError, bundleUi } from "../../src/runtime/ui-bundles.js";
import { GraphLoadError, GraphNotFoundError, type GraphRegistry, defaultAssistantId, graphSchemas, loadGraphRegistry } from "../../src/runtime/graphs.js";
import {
  LanggraphConfigError,
  applyEnv,
  graphDefaults,
  loadLanggraphConfig,
  parseLanggraphConfig,
  parseLanggraphConfigEnv,
  resolveWebhookHeaders,
} from "../../src/langgraph-config.js";

const here = path.join(path.dirname(fileURLToPath(import.meta.url)), "..");
const root = path.resolve(here, "..");

// The example graph calls a model only when these are set: make sure no test can reach it.
const savedModelEnv = { base: process.env.OPENAI_BASE_URL, key: process.env.OPENAI_API_KEY };
delete process.env.OPENAI_BASE_URL;
delete process.env.OPENAI_API_KEY;
t.teardown(() => {
  if (savedModelEnv.base !== undefined) process.env.OPENAI_BASE_URL = savedModelEnv.base;
  if (savedModelEnv.key !== undefined) process.env.OPENAI_API_KEY = savedModelEnv.key;
});

let tmp: string;
t.before(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), "graphs-test-"));
});
t.teardown(async () => {
  await rm(tmp, { recursive: true, force: true });
});

async function writeConfig(name: string, json: unknown, raw?: string): Promise<string> {
  const dir = path.join(tmp, name);
  await import("node:fs/promises").then((fs) => fs.mkdir(dir, { recursive: true }));
  const file = path.join(dir, "langgraph.json");
  await writeFile(file, raw ?? JSON.stringify(json));
  return file;
}

function lastMessage(result: { messages: BaseMessage[] }): BaseMessage {
  const last = result.messages.at(-1);
  if (!last) throw new Error("no messages");
  return last;
}

t.test("defaultAssistantId = uuid5(graph_id, NAMESPACE_GRAPH)", async (t) => {
  const expected: Record<string, string> = {
    agent: "fe096781-5601-53d2-b2f6-0d3403f7e9ca",
    nested: "0813419b-f0e6-579e-bdee-18d9fdf48632",
    weather: "5fb44052-6611-57fc-99b4-527b0d62f788",
    error: "b1020f32-4a55-54cf-8b58-9a87be49a14c",
    delay: "6b64a346-58f7-5a01-a694-0f1366439004",
    dynamic: "f4f3e31f-49aa-5884-8008-978efe2c7a32",
    agent_simple: "41237ec1-a1e5-5297-9ec9-e27936781bda",
    simple_runtime: "14c4a82c-001b-58a5-bc2a-f4f16ddcb167",
  };
  for (const [graphId, id] of Object.entries(expected)) t.equal(defaultAssistantId(graphId), id, graphId);
});

t.test("repository langgraph.json and the example graph", async (t) => {
  const loaded = await loadLanggraphConfig(path.join(root, "langgraph.json"), { applyEnv: false });
  t.equal(loaded.baseDir, root);
  t.same(Object.keys(loaded.config.graphs), ["agent"]);
  t.match(loaded.config.graphs.agent, { path: "./src/graphs/agent.ts", exportName: "graph" });

  const registry = await loadGraphRegistry(loaded.config, loaded.baseDir, { graphDefaults: {} });
  t.same(registry.ids(), ["agent"]);
  t.ok(registry.has("agent"));
  t.notOk(registry.has("nope"));
  t.equal(registry.kind("agent"), "compiled");
  t.type(registry.description("agent"), "string");
  t.ok(registry.description("agent")!.length > 0);

  const drawable = await registry.drawable("agent", { xray: true });
  t.ok(
    drawable.nodes.some((n) => n.id === "agent"),
    "node agent",
  );
  t.ok(drawable.nodes.some((n) => n.id === "__start__"));
  t.ok(drawable.edges.some((e) => e.source === "__start__" && e.target === "agent"));
  t.ok(drawable.edges.some((e) => e.source === "agent" && e.target === "__end__"));

  const schemas = await registry.schemas("agent");
  t.equal(schemas.graph_id, "agent");
  t.match(schemas.state_schema, { type: "object", properties: { messages: { langgraph_type: "messages" } } });
  t.match(schemas.input_schema, { properties: { messages: {} } });
  t.match(schemas.output_schema, { properties: { messages: {} } });
  t.equal(schemas.config_schema, null);
  t.equal(schemas.context_schema, null);
  t.same(await registry.subgraphs("agent"), {});

  const graph = await registry.get("agent", {});
  t.equal(await registry.get("agent", {}), graph, "compiled graphs are cached");

  // {role, content} form, plus a model_name without an endpoint: still offline.
  const a = await graph.invoke({ messages: [{ role: "user", content: "hello" }] }, { configurable: { model_name: "gpt-test" } });
  t.equal(a.messages.length, 2);
  t.equal(a.messages[0].getType(), "human");
  t.equal(lastMessage(a).getType(), "ai");
  t.equal(lastMessage(a).content, "You said: hello");
  t.equal(lastMessage(a).id, "ai-1");

  // LangChain dict form with content parts, and after an earlier exchange.
  const b = await graph.invoke({
    messages: [
      { type: "human", content: "first" },
      { type: "ai", content: "You said: first", id: "ai-1" },
      { type: "human", content: [{ type: "text", text: "second" }] },
    ],
  });
  t.equal(lastMessage(b).content, "You said: second");
  t.equal(lastMessage(b).id, "ai-3");

  // Message instances.
  const c = await graph.invoke({ messages: [new HumanMessage("third")] });
  t.ok(lastMessage(c) instanceof AIMessage, "same @langchain/core instance as the server");
  t.equal(lastMessage(c).content, "You said: third");

  t.same(registry.defaultAssistants(), [
    {
      assistant_id: "fe096781-5601-53d2-b2f6-0d3403f7e9ca",
      graph_id: "agent",
      name: "agent",
      description: registry.description("agent"),
      config: {},
      context: {},
      metadata: { created_by: "system" },
    },
  ]);
});

t.test("test graphs", async (t) => {
  const loaded = await loadLanggraphConfig(path.join(here, "graphs", "langgraph.json"), { applyEnv: false });
  const registry: GraphRegistry = await loadGraphRegistry(loaded.config, loaded.baseDir, { graphDefaults: {} });
  t.same(registry.ids(), ["agent", "error", "delay", "interrupt", "subgraph", "custom", "factory", "store"]);

  t.test("export kinds and descriptions", async (t) => {
    t.equal(registry.kind("agent"), "compiled");
    t.equal(registry.kind("custom"), "promise");
    t.equal(registry.kind("factory"), "factory");
    t.equal(registry.description("factory"), "Graph made per run by a factory of the config");
    t.equal(registry.description("error"), null);
    t.throws(() => registry.description("nope"), GraphNotFoundError);
    await t.rejects(registry.get("nope"), { name: "GraphNotFoundError", message: /Graph 'nope' not found/ });
  });

  t.test("agent re-exports the example", async (t) => {
    const graph = await registry.get("agent");
    const out = await graph.invoke({ messages: [{ role: "user", content: "x" }] });
    t.equal(lastMessage(out).content, "You said: x");
  });

  t.test("error throws CustomError('Boo!')", async (t) => {
    const graph = await registry.get("error");
    await t.rejects(graph.invoke({ messages: [{ role: "user", content: "x" }] }), {
      name: "CustomError",
      message: "Boo!",
    });
  });

  t.test("delay: from input, from configurable, and aborted promptly", async (t) => {
    const graph = await registry.get("delay");
    const zero = await graph.invoke({ messages: [], delay: 0 });
    t.equal(lastMessage(zero).content, "waited 0ms");
    const fromInput = await graph.invoke({ messages: [], delay: 5 });
    t.equal(lastMessage(fromInput).content, "waited 5ms");
    const fromConfig = await graph.invoke({ messages: [] }, { configurable: { delay: 3 } });
    t.equal(lastMessage(fromConfig).content, "waited 3ms");

    const controller = new AbortController();
    const started = Date.now();
    const stream = await graph.stream({ messages: [], delay: 600_000 }, { streamMode: "tasks", signal: controller.signal });
    let sawTaskStart = false;
    await t.rejects(
      (async () => {
        for await (const chunk of stream) {
          // The `wait` task has started: cancel the run.
          if (!sawTaskStart && chunk && typeof chunk === "object" && (chunk as { name?: string }).name === "wait") {
            sawTaskStart = true;
            controller.abort();
          }
        }
      })(),
    );
    t.ok(sawTaskStart, "the wait task started");
    // Had the node ignored config.signal, its 10-minute timer would keep this process alive
    // and the file would hit tap's timeout.
    t.ok(Date.now() - started < 30_000, "abort ended the wait long before the delay");
  });

  t.test("interrupt and resume", async (t) => {
    const graph = await registry.get("interrupt");
    const original = graph.checkpointer;
    graph.checkpointer = new MemorySaver();
    t.teardown(() => {
      graph.checkpointer = original;
    });
    const config = { configurable: { thread_id: "t-1" } };
    const first = await graph.invoke({ messages: [{ role: "user", content: "go" }] }, config);
    t.match(first.__interrupt__, [{ value: { question: "Continue?" } }]);
    const state = await graph.getState(config);
    t.same(state.next, ["ask"]);
    const resumed = await graph.invoke(new Command({ resume: "yes" }), config);
    t.equal(lastMessage(resumed).content, "You answered: yes");
    t.equal(lastMessage(resumed).id, "ai-1");
  });

  t.test("subgraph: namespaces and schemas", async (t) => {
    const subgraphs = await registry.subgraphs("subgraph");
    t.same(Object.keys(subgraphs), ["child"]);
    t.match(subgraphs.child, {
      input_schema: { type: "object" },
      output_schema: { type: "object" },
      state_schema: { properties: { messages: {} } },
      config_schema: null,
      context_schema: null,
    });
    const recursive = await registry.subgraphs("subgraph", { recurse: true });
    t.same(Object.keys(recursive).sort(), ["child", "child|grandchild"]);
    t.same(Object.keys(await registry.subgraphs("subgraph", { namespace: "child" })), ["child"]);
    t.same(Object.keys(await registry.subgraphs("subgraph", { namespace: "child|grandchild", recurse: true })), ["child|grandchild"]);

    const drawable = await registry.drawable("subgraph", { xray: true });
    t.ok(
      drawable.nodes.some((n) => String(n.id).includes("inner")),
      "xray shows subgraph nodes",
    );

    const graph = await registry.get("subgraph");
    const namespaces = new Set<string>();
    for await (const [ns] of await graph.stream({ messages: [{ role: "user", content: "x" }] }, { streamMode: "updates", subgraphs: true })) {
      namespaces.add((ns as string[]).map((part) => part.split(":")[0]).join("|"));
    }
    t.same([...namespaces].sort(), ["", "child", "child|grandchild"]);
    const out = await graph.invoke({ messages: [{ role: "user", content: "x" }] });
    t.same(
      out.messages.map((m: BaseMessage) => m.content),
      ["x", "from grandchild", "from child", "from parent"],
    );
  });

  t.test("custom stream events", async (t) => {
    const graph = await registry.get("custom");
    const chunks: unknown[] = [];
    for await (const chunk of await graph.stream({ messages: [] }, { streamMode: "custom" })) chunks.push(chunk);
    t.same(chunks, [
      { progress: 1, of: 2 },
      { progress: 2, of: 2 },
    ]);
  });

  t.test("factory is called per get with the config", async (t) => {
    const a = await registry.get("factory", { configurable: { prefix: "hey" } });
    const b = await registry.get("factory", {});
    t.not(a, b, "a new graph per call");
    t.equal(lastMessage(await a.invoke({ messages: [{ role: "user", content: "x" }] })).content, "hey: x");
    t.equal(lastMessage(await b.invoke({ messages: [{ role: "user", content: "x" }] })).content, "factory: x");
    const drawable = await registry.drawable("factory");
    t.ok(drawable.nodes.some((n) => n.id === "agent"));
    t.equal((await registry.schemas("factory")).graph_id, "factory");
    t.same(registry.defaultAssistants().find((d) => d.graph_id === "factory")?.name, "factory");
  });
});

t.test("schemas of Annotation state and of a context schema", async (t) => {
  const A = Annotation.Root({ ...MessagesAnnotation.spec, count: Annotation<number>() });
  const annotated = new StateGraph(A)
    .addNode("n", () => ({}))
    .addEdge(START, "n")
    .compile();
  t.same(graphSchemas(annotated).state_schema, {
    type: "object",
    properties: { messages: { type: "array", items: { type: "object" }, langgraph_type: "messages", description: "A list of chat messages" }, count: {} },
  });
  t.match(graphSchemas(annotated), { input_schema: { properties: { count: {} } }, config_schema: null });

  const withContext = new StateGraph({
    state: new StateSchema({ messages: MessagesValue }),
    context: z.object({ user: z.string() }),
  })
    .addNode("n", () => ({}))
    .addEdge(START, "n")
    .compile();
  const schemas = graphSchemas(withContext);
  t.match(schemas.context_schema, { type: "object", properties: { user: { type: "string" } } });
  t.same(schemas.config_schema, schemas.context_schema, "config_schema = context_schema, as the JS server");
});

t.test("type schemas: one compiler pass per batch, a failed target or pass answers undefined", async (t) => {
  const otherFile = path.join(root, "test", "graphs", "parity", "schema-other.ts");
  const reader = new TypeSchemaReader();
  t.teardown(() => reader.close());
  const [annotation, missing] = await reader.read([
    { sourceFile: otherFile, exportSymbol: "annotation" },
    { sourceFile: otherFile, exportSymbol: "nope" },
  ]);
  t.match(annotation, { annotation: { state: { type: "object", properties: { score: { type: "number" }, note: { type: "string" } } } } });
  t.equal(missing, undefined, "an export the file does not have: undefined, the batch's other graphs still answer");
  t.equal(reader.passes, 1, "both graphs in one compiler pass");
  const [again, missingAgain] = await reader.read([
    { sourceFile: otherFile, exportSymbol: "annotation" },
    { sourceFile: otherFile, exportSymbol: "nope" },
  ]);
  t.equal(again, annotation, "answered from memory the second time");
  t.equal(missingAgain, undefined);
  t.equal(reader.passes, 1, "a graph whose types cannot be read is not read again");

  // A pass that cannot finish in time: the registry answers what the channels tell, never an error.
  const slow = new TypeSchemaReader({ timeoutMs: 1 });
  t.teardown(() => slow.close());
  const registry = await loadGraphRegistry(parseLanggraphConfig({ graphs: { annotation: `${otherFile}:annotation` } }), tmp, {
    graphDefaults: {},
    typeSchemas: slow,
  });
  const schemas = await registry.schemas("annotation");
  t.same(schemas.state_schema, {
    type: "object",
    properties: {
      messages: { type: "array", items: { type: "object" }, langgraph_type: "messages", description: "A list of chat messages" },
      tags: { type: "array" },
      score: { type: "number" },
      note: {},
    },
  });
  t.equal(schemas.config_schema, null);
  await registry.schemas("annotation");
  t.equal(slow.passes, 2, "a pass that failed as a whole is tried again when asked again");
});

t.test("generative UI bundles: errors name the agent and the file", async (t) => {
  const dir = path.join(tmp, "ui");
  await import("node:fs/promises").then((fs) => fs.mkdir(dir, { recursive: true }));
  await writeFile(path.join(dir, "broken.jsx"), "export default { a: () => <div> };\n");
  await t.rejects(bundleUi({ chat: "./broken.jsx" }, { cwd: dir }), {
    name: "UiBundleError",
    message: /^langgraph\.json: ui\.chat: cannot bundle \.\/broken\.jsx: /,
  });
  await t.rejects(
    bundleUi({ chat: "../outside.jsx" }, { cwd: dir }),
    new UiBundleError("langgraph.json: ui.chat: cannot bundle ../outside.jsx: the UI path must be inside the project (../outside.jsx)"),
  );
  await writeFile(path.join(dir, "ok.jsx"), "export default { hello: () => <b>hi</b> };\n");
  const bundles = await bundleUi({ "my agent": "./ok.jsx" }, { cwd: dir });
  const [js] = bundles.get("my agent")!;
  t.equal(js.basename, "entrypoint.js");
  t.match(new TextDecoder().decode(js.contents), /var __LGUI_my_agent = /, "the global is named after the agent, as the official bundler names it");
});

t.test("invalid langgraph.json files give one-line errors", async (t) => {
  const cases: [string, unknown, string][] = [
    ["no-colon", { graphs: { agent: "./agent.ts" } }, 'langgraph.json: graphs.agent: expected "path:export"'],
    ["obj-no-colon", { graphs: { agent: { path: "./a.ts" } } }, 'langgraph.json: graphs.agent.path: expected "path:export"'],
    ["no-graphs", {}, "langgraph.json: graphs: required"],
    ["bad-flag", { graphs: { a: "./a.ts:g" }, http: { disable_webhooks: "yes" } }, "langgraph.json: http.disable_webhooks: expected boolean, received string"],
    ["bad-env", { graphs: { a: "./a.ts:g" }, env: 3 }, "langgraph.json: env: expected an object of variables or a path to a .env file"],
    ["bad-desc", { graphs: { a: { path: "./a.ts:g", description: 1 } } }, "langgraph.json: graphs.a.description: expected a string"],
    ["bad-ui", { graphs: { a: "./a.ts:g" }, ui: { chat: 1 } }, "langgraph.json: ui.chat: expected string, received number"],
    ["bad-ui-shared", { graphs: { a: "./a.ts:g" }, ui_config: { shared: "zod" } }, "langgraph.json: ui_config.shared: expected array, received string"],
    [
      "bad-header",
      { graphs: { a: "./a.ts:g" }, webhooks: { headers: { "x-token": "${{ env.SECRET }}" } } },
      "langgraph.json: webhooks.headers.x-token: environment variable SECRET must start with LG_WEBHOOK_",
    ],
  ];
  for (const [name, json, message] of cases) {
    const file = await writeConfig(name, json);
    const err = await loadLanggraphConfig(file, { applyEnv: false }).then(
      () => undefined,
      (e: unknown) => e,
    );
    t.ok(err instanceof LanggraphConfigError, name);
    t.equal((err as Error).message, message, name);
    t.notOk((err as Error).message.includes("\n"), `${name}: one line`);
  }
  const badJson = await writeConfig("bad-json", null, "{ graphs: ");
  await t.rejects(loadLanggraphConfig(badJson), { message: /^langgraph\.json: invalid JSON: / });
  await t.rejects(loadLanggraphConfig(path.join(tmp, "missing", "langgraph.json")), {
    message: /^langgraph\.json: cannot read .*ENOENT$/,
  });
});

t.test("graph files that do not provide a graph", async (t) => {
  const agentFile = path.join(root, "src", "graphs", "agent.ts");
  await t.rejects(loadGraphRegistry(parseLanggraphConfig({ graphs: { x: `${agentFile}:nope` } }), tmp), {
    name: "GraphLoadError",
    message: /^Graph "x": .* has no export "nope"$/,
  });
  await t.rejects(loadGraphRegistry(parseLanggraphConfig({ graphs: { x: `${agentFile}:AgentState` } }), tmp), {
    name: "GraphLoadError",
    message: /not a compiled LangGraph graph/,
  });
  await t.rejects(loadGraphRegistry(parseLanggraphConfig({ graphs: { x: "./missing.ts:graph" } }), tmp), GraphLoadError);
  // An uncompiled builder is compiled at load time.
  const registry = await loadGraphRegistry(parseLanggraphConfig({ graphs: { b: `${agentFile}:builder` } }), tmp);
  t.equal(registry.kind("b"), "builder");
  t.equal(lastMessage(await (await registry.get("b")).invoke({ messages: [{ role: "user", content: "b" }] })).content, "You said: b");
});

t.test("env: object and .env file, without overriding what is set", async (t) => {
  const dir = path.join(tmp, "env-file");
  const file = await writeConfig("env-file", { graphs: { a: "./a.ts:g" }, env: "./.env" });
  await writeFile(path.join(dir, ".env"), '# comment\nGT_ONE=1\nGT_TWO="two words"\nexport GT_THREE=3\n');
  const target: NodeJS.ProcessEnv = { GT_TWO: "already" };
  const loaded = await loadLanggraphConfig(file, { processEnv: target });
  t.same(loaded.env, { GT_ONE: "1", GT_TWO: "two words", GT_THREE: "3" });
  t.same(loaded.appliedEnv.sort(), ["GT_ONE", "GT_THREE"]);
  t.same(target, { GT_ONE: "1", GT_TWO: "already", GT_THREE: "3" });

  const objFile = await writeConfig("env-obj", { graphs: { a: "./a.ts:g" }, env: { GT_FOUR: 4, GT_FIVE: true } });
  const name = `GT_PROCESS_${process.pid}`;
  process.env.GT_FIVE_PRESET = "x";
  t.teardown(() => {
    delete process.env.GT_FOUR;
    delete process.env.GT_FIVE;
    delete process.env.GT_FIVE_PRESET;
    delete process.env[name];
  });
  const obj = await loadLanggraphConfig(objFile);
  t.same(obj.env, { GT_FOUR: "4", GT_FIVE: "true" });
  t.equal(process.env.GT_FOUR, "4", "applied to process.env by default");
  const noApply = await loadLanggraphConfig(await writeConfig("env-noapply", { graphs: { a: "./a.ts:g" }, env: { [name]: "v" } }), { applyEnv: false });
  t.same(noApply.appliedEnv, []);
  t.equal(process.env[name], undefined);

  const names = await loadLanggraphConfig(await writeConfig("env-names", { graphs: { a: "./a.ts:g" }, env: ["GT_X"] }));
  t.same(names.env, {});

  const missing = await writeConfig("env-missing", { graphs: { a: "./a.ts:g" }, env: "./nope.env" });
  await t.rejects(loadLanggraphConfig(missing), { message: /^langgraph\.json: env: cannot read .*nope\.env: ENOENT$/ });

  t.same(applyEnv({ A: "1", B: "2" }, { B: "x" } as NodeJS.ProcessEnv), ["A"]);
});

t.test("http, webhooks and auth sections", async (t) => {
  const config = parseLanggraphConfig({
    graphs: { a: "./a.ts:g" },
    http: { disable_webhooks: true, disable_a2a: true, body_limit: 1024, some_future_key: 1 },
    webhooks: {
      headers: { authorization: "Bearer ${{ env.LG_WEBHOOK_TOKEN }}", "x-static": "s" },
      url: { allowed_domains: ["*.example.com"], require_https: true },
    },
    auth: { path: "./auth.ts:auth" },
    node_version: "20",
  });
  t.equal(config.http.disable_webhooks, true);
  t.equal(config.http.disable_a2a, true);
  t.equal(config.http.disable_meta, false);
  t.equal(config.http.body_limit, 1024);
  t.equal(config.http.some_future_key, 1, "unknown http keys pass through");
  t.equal(config.node_version, "20", "unknown top-level keys pass through");
  t.same(config.auth, { path: "./auth.ts:auth" });
  t.same(config.webhooks.url, {
    allowed_domains: ["*.example.com"],
    require_https: true,
    max_url_length: 4096,
    disable_loopback: true,
    disable_private_ips: true,
  });
  t.equal(config.webhooks.env_prefix, "LG_WEBHOOK_");
  t.same(resolveWebhookHeaders(config.webhooks, { LG_WEBHOOK_TOKEN: "tok" }), {
    authorization: "Bearer tok",
    "x-static": "s",
  });
  t.throws(() => resolveWebhookHeaders(config.webhooks, {}), {
    message: "webhooks.headers.authorization: environment variable LG_WEBHOOK_TOKEN is not set",
  });

  const defaults = parseLanggraphConfig({ graphs: {} });
  t.equal(defaults.http.disable_webhooks, false);
  t.same(defaults.webhooks, {
    env_prefix: "LG_WEBHOOK_",
    headers: {},
    url: { max_url_length: 4096, require_https: false, disable_loopback: true, disable_private_ips: true },
  });
  t.equal(defaults.auth, undefined);
});

t.test("LANGGRAPH_CONFIG", async (t) => {
  const parsed = parseLanggraphConfigEnv(
    JSON.stringify({
      agent: { configurable: { model_name: "m" }, context: { user: "u" }, recursion_limit: 7, tags: ["x"] },
      other: { configurable: { a: 1 } },
    }),
  );
  t.same(parsed, {
    agent: { config: { configurable: { model_name: "m" }, recursion_limit: 7, tags: ["x"] }, context: { user: "u" } },
    other: { config: { configurable: { a: 1 } }, context: {} },
  });
  t.same(graphDefaults(parsed, "missing"), { config: {}, context: {} });
  t.same(parseLanggraphConfigEnv(undefined), {});
  t.same(parseLanggraphConfigEnv(""), {});
  t.throws(() => parseLanggraphConfigEnv("{nope"), { message: /^LANGGRAPH_CONFIG: invalid JSON: / });
  t.throws(() => parseLanggraphConfigEnv("[]"), { message: "LANGGRAPH_CONFIG: expected a JSON object of graph_id -> config" });
  t.throws(() => parseLanggraphConfigEnv('{"agent": 1}'), { message: "LANGGRAPH_CONFIG: agent: expected an object" });
  t.throws(() => parseLanggraphConfigEnv('{"agent": {"context": 1}}'), {
    message: "LANGGRAPH_CONFIG: agent.context: expected an object",
  });

  // The registry reads process.env.LANGGRAPH_CONFIG when not given defaults.
  const saved = process.env.LANGGRAPH_CONFIG;
  process.env.LANGGRAPH_CONFIG = JSON.stringify({ agent: { configurable: { model_name: "m" }, context: { c: 1 } } });
  t.teardown(() => {
    if (saved === undefined) delete process.env.LANGGRAPH_CONFIG;
    else process.env.LANGGRAPH_CONFIG = saved;
  });
  const loaded = await loadLanggraphConfig(path.join(root, "langgraph.json"), { applyEnv: false });
  const registry = await loadGraphRegistry(loaded.config, loaded.baseDir);
  t.same(registry.defaults("agent"), { config: { configurable: { model_name: "m" } }, context: { c: 1 } });
  t.match(registry.defaultAssistants(), [{ graph_id: "agent", config: { configurable: { model_name: "m" } }, context: { c: 1 } }]);
});

/** Child processes of this process whose command line mentions esbuild (from /proc: Linux). */
async function esbuildChildren(): Promise<number[]> {
  const { readdir, readFile } = await import("node:fs/promises");
  const pids: number[] = [];
  for (const name of await readdir("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = await readFile(`/proc/${name}/stat`, "utf8");
      // Fields after the parenthesised command: state, ppid, …
      const [state, ppid] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(ppid) !== process.pid || state === "Z") continue; // a zombie holds no memory
      const cmdline = await readFile(`/proc/${name}/cmdline`, "utf8");
      if (cmdline.includes("esbuild")) pids.push(Number(name));
    } catch {
      // the process ended while we looked
    }
  }
  return pids;
}

/**
 * esbuild children of this process that were not in `before`. tsx (the test runner's loader) runs an
 * esbuild service of its own in this process, so only new ones count. esbuild's `stop()` sends the
 * service SIGTERM without waiting for it: give the new ones up to 10 s to exit (polling /proc, there
 * is no exit event for a process we did not spawn ourselves).
 */
async function newEsbuildChildrenAfterExit(before: number[]): Promise<number[]> {
  const fresh = async () => (await esbuildChildren()).filter((pid) => !before.includes(pid));
  const deadline = Date.now() + 10_000;
  let left = await fresh();
  while (left.length > 0 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 10));
    left = await fresh();
  }
  return left;
}

t.test("no esbuild service process is left once the graphs are loaded", { skip: process.platform !== "linux" && "reads /proc" }, async (t) => {
  const before = await esbuildChildren();
  // The probe sees the service while it runs (else the assertions below would prove nothing).
  const esbuild = await import("esbuild");
  await esbuild.transform("const a: number = 1", { loader: "ts" });
  t.ok(
    (await esbuildChildren()).some((pid) => !before.includes(pid)),
    "the probe sees esbuild's service process",
  );
  await esbuild.stop();
  t.same(await newEsbuildChildrenAfterExit(before), [], "stop() ends it");

  const agentFile = path.join(root, "src", "graphs", "agent.ts");
  const [a, b] = await Promise.all([
    loadGraphRegistry(parseLanggraphConfig({ graphs: { a: `${agentFile}:graph` } }), tmp),
    loadGraphRegistry(parseLanggraphConfig({ graphs: { b: `${agentFile}:builder` } }), tmp),
  ]);
  t.equal(a.kind("a"), "compiled", "a TypeScript graph was loaded");
  t.equal(b.kind("b"), "builder", "concurrent loads both finish (one does not stop esbuild under the other)");
  t.same(await newEsbuildChildrenAfterExit(before), [], "no esbuild child process remains");
  // A later load starts the service again and stops it again.
  await loadGraphRegistry(parseLanggraphConfig({ graphs: { c: `${agentFile}:graph` } }), tmp);
  t.same(await newEsbuildChildrenAfterExit(before), [], "none after a second load either");
});
