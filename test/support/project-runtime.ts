/**
 * A user's project with its own node_modules, driven through the server with the SDK: its graphs run
 * on its own copies of @langchain/langgraph, @langchain/core and @langchain/langgraph-checkpoint, not
 * the server's. The project gets copies of installed packages (distinct directories, hence distinct
 * module instances: the split a project install gives, without the network); every other package is a
 * link to the server's. test/project-runtime*.test.ts run it on each LangGraph version they name.
 */
import { cp, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Test } from "tap";
import semver from "semver";
import { AsyncBatchedStore } from "@langchain/langgraph-checkpoint";
import { messagesStateReducer } from "@langchain/langgraph";
import { drainsOnDemand } from "../../src/runtime/langchain-patches/index.js";
import { isMessagesReducer } from "../../src/runtime/graph-schemas.js";
import { findPackage, packageEntryUrl, transpiledFileOf } from "../../src/module-loader.js";
import { startTestServer } from "./server.js";

const root = path.resolve(import.meta.dirname, "..", "..");
const repoPeers = (JSON.parse(await readFile(path.join(root, "package.json"), "utf8")) as { peerDependencies: Record<string, string> }).peerDependencies;
const COPIED = ["@langchain/langgraph", "@langchain/core", "@langchain/langgraph-checkpoint"];

const GRAPH = `
import { AIMessage } from "@langchain/core/messages";
import { FakeListChatModel } from "@langchain/core/utils/testing";
import { Annotation, END, MessagesAnnotation, START, StateGraph, type LangGraphRunnableConfig } from "@langchain/langgraph";
import { greeting } from "./lib/greeting.ts";

const State = Annotation.Root({
  ...MessagesAnnotation.spec,
  batched: Annotation<boolean>,
  stored: Annotation<unknown>,
});

const model = new FakeListChatModel({ responses: ["from the model"] });

export const graph = new StateGraph(State)
  .addNode("remember", async (_state, config: LangGraphRunnableConfig) => {
    const store = config.store!;
    await store.put(["project"], "note", { n: 1 });
    const item = await store.get(["project"], "note");
    // The wrapper LangGraph puts around the run's store: patched (by the server) to drain on demand.
    const batched = (store as unknown as Record<symbol, unknown>)[Symbol.for("agent-server.batched-store-on-demand")] === true;
    return { batched, stored: item?.value ?? null };
  })
  .addNode("reply", async (state) => {
    const answer = await model.invoke(state.messages);
    return { messages: [answer, new AIMessage(greeting())] };
  })
  .addEdge(START, "remember")
  .addEdge("remember", "reply")
  .addEdge("reply", END)
  .compile();
`;

/** Every path under `dir` but node_modules (relative), to tell whether anything was added. */
async function listing(dir: string): Promise<string[]> {
  const entries = (await readdir(dir, { recursive: true })) as string[];
  return entries.filter((e) => !e.startsWith("node_modules")).sort();
}

const ASKER = `
import { Annotation, START, StateGraph, interrupt } from "@langchain/langgraph";

const State = Annotation.Root({ question: Annotation<string>, answer: Annotation<string> });

export const graph = new StateGraph(State)
  .addNode("ask", (state) => ({ answer: String(interrupt({ question: state.question })) }))
  .addEdge(START, "ask")
  .compile();
`;

const TOOLS = `
import { AIMessage, ToolMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { END, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { ToolNode } from "@langchain/langgraph/prebuilt";
import { z } from "zod";

const add = tool(async ({ a, b }: { a: number; b: number }) => String(a + b), {
  name: "add", description: "adds two numbers", schema: z.object({ a: z.number(), b: z.number() }),
});

// A model that asks for the tool until it has an answer, then states it.
const model = (state: typeof MessagesAnnotation.State) => {
  const last = state.messages.at(-1);
  if (last instanceof ToolMessage) return { messages: [new AIMessage(\`the sum is \${String(last.content)}\`)] };
  return { messages: [new AIMessage({ content: "", tool_calls: [{ id: "call-1", name: "add", args: { a: 2, b: 3 } }] })] };
};

export const graph = new StateGraph(MessagesAnnotation)
  .addNode("model", model)
  .addNode("tools", new ToolNode([add]))
  .addEdge(START, "model")
  .addConditionalEdges("model", (state) => ((state.messages.at(-1) as AIMessage).tool_calls?.length ? "tools" : END))
  .addEdge("tools", "model")
  .compile();
`;

// As the official suite's zod_registry_graph: zod state with withLangGraph's jsonSchemaExtra.
const ZOD_REGISTRY = `
import { z } from "zod/v3";
import { StateGraph, START, END } from "@langchain/langgraph";
import { withLangGraph } from "@langchain/langgraph/zod";

const AgentState = z.object({
  messages: withLangGraph(z.array(z.string()), {
    reducer: { schema: z.string(), fn: (a: string[], b: string) => [...a, b] },
    default: () => [],
    jsonSchemaExtra: { langgraph_type: "messages" },
  }),
  count: z.number().default(0),
});

export const graph = new StateGraph(AgentState)
  .addNode("process", (state) => ({ messages: \`Message \${state.count + 1}\`, count: state.count + 1 }))
  .addEdge(START, "process")
  .addEdge("process", END)
  .compile();
`;

/**
 * A project folder with copies of the LangGraph packages; \`langgraphFrom\` names the installed package
 * the project's @langchain/langgraph is copied from (an alias of another version, with its own
 * nested dependencies).
 */
async function makeProject(langgraphFrom = "@langchain/langgraph"): Promise<string> {
  const project = await mkdtemp(path.join(tmpdir(), "agent-server-project-"));
  const modules = path.join(project, "node_modules");
  await mkdir(path.join(modules, "@langchain"), { recursive: true });
  for (const name of COPIED) {
    const from = name === "@langchain/langgraph" ? langgraphFrom : name;
    await cp(path.join(root, "node_modules", from), path.join(modules, name), { recursive: true, dereference: true });
  }
  // Everything else the copies need: the server's, by link (links resolve to the server's node_modules).
  for (const entry of await readdir(path.join(root, "node_modules"))) {
    if (entry === ".bin" || entry.startsWith(".")) continue;
    if (entry === "@langchain") {
      for (const sub of await readdir(path.join(root, "node_modules", entry))) {
        if (!COPIED.includes(`@langchain/${sub}`)) await symlink(path.join(root, "node_modules", entry, sub), path.join(modules, entry, sub));
      }
      continue;
    }
    await symlink(path.join(root, "node_modules", entry), path.join(modules, entry));
  }
  await writeFile(path.join(project, "package.json"), JSON.stringify({ name: "a-project", private: true, type: "module" }));
  await writeFile(
    path.join(project, "tsconfig.json"),
    JSON.stringify({
      compilerOptions: { target: "ES2022", module: "NodeNext", moduleResolution: "NodeNext", strict: true, allowImportingTsExtensions: true, noEmit: true },
    }),
  );
  await mkdir(path.join(project, "src", "lib"), { recursive: true });
  await writeFile(path.join(project, "src", "lib", "greeting.ts"), `export const greeting = (): string => "hello from the project";\n`);
  await writeFile(path.join(project, "src", "agent.ts"), GRAPH);
  await writeFile(path.join(project, "src", "asker.ts"), ASKER);
  await writeFile(path.join(project, "src", "tools.ts"), TOOLS);
  await writeFile(path.join(project, "src", "zod-registry.ts"), ZOD_REGISTRY);
  await writeFile(
    path.join(project, "langgraph.json"),
    JSON.stringify({
      graphs: { agent: "./src/agent.ts:graph", asker: "./src/asker.ts:graph", tools: "./src/tools.ts:graph", zod_registry: "./src/zod-registry.ts:graph" },
    }),
  );
  return project;
}

const internalKeys = (metadata: unknown) => Object.keys((metadata ?? {}) as object).filter((k) => k.startsWith("__"));

/**
 * Serves a project whose @langchain/langgraph is a copy of the installed package `from` (the server's
 * own, or an alias of another version) and checks, with the SDK: schemas (langgraph_type from the
 * messages reducer and from the zod registry), store batching, clean metadata, a second assistant, an
 * interrupt resumed, a tool loop, and that nothing was written into the project folder.
 */
export async function exerciseProjectRuntime(t: Test, from: string): Promise<void> {
  const project = await makeProject(from);
  t.teardown(() => rm(project, { recursive: true, force: true }));
  const installed = JSON.parse(await readFile(path.join(root, "node_modules", from, "package.json"), "utf8")) as { version: string };
  t.ok(semver.satisfies(installed.version, repoPeers["@langchain/langgraph"]!), `${installed.version} is in the supported range`);
  const langgraph = findPackage("@langchain/langgraph", path.join(project, "src"))!;
  t.equal(langgraph.dir, path.join(project, "node_modules", "@langchain", "langgraph"), "the project's LangGraph is found from the graph's place");
  const projectCheckpoint = (await import(packageEntryUrl(findPackage("@langchain/langgraph-checkpoint", langgraph.dir)!)!)) as {
    AsyncBatchedStore: typeof AsyncBatchedStore;
  };
  t.not(projectCheckpoint.AsyncBatchedStore, AsyncBatchedStore, "the project's copy is another module instance");
  const projectLangGraph = (await import(packageEntryUrl(langgraph)!)) as { messagesStateReducer: unknown };
  t.not(projectLangGraph.messagesStateReducer, messagesStateReducer, "so is its messages reducer");

  const before = await listing(project);
  const server = await startTestServer({ env: { LANGGRAPH_JSON: path.join(project, "langgraph.json") } });
  t.teardown(() => server.close());
  const { client } = server;

  // The schema hint comes from the project's reducer.
  const [assistant] = await client.assistants.search({ graphId: "agent" });
  const schemas = await client.assistants.getSchemas(assistant.assistant_id);
  const messages = (schemas.state_schema as { properties?: Record<string, { langgraph_type?: string }> } | null)?.properties?.messages;
  t.equal(messages?.langgraph_type, "messages", "state_schema marks messages as messages");
  t.ok(isMessagesReducer(projectLangGraph.messagesStateReducer), "the project's messages reducer is known");
  const zodSchemas = await client.assistants.getSchemas("zod_registry");
  t.match(
    zodSchemas.state_schema,
    { type: "object", properties: { messages: { langgraph_type: "messages" }, count: { type: "number" } } },
    "zod registry's jsonSchemaExtra is in state_schema",
  );

  // A run, on the project's packages, with its store batching patched.
  const thread = await client.threads.create();
  const values = (await client.runs.wait(thread.thread_id, assistant.assistant_id, { input: { messages: [{ role: "user", content: "hi" }] } })) as Record<
    string,
    unknown
  >;
  const texts = ((values.messages ?? []) as { content: unknown }[]).map((m) => m.content);
  t.same(texts, ["hi", "from the model", "hello from the project"], "the run ran the graph, with its relative import");
  t.same(values.stored, { n: 1 }, "the store answered");
  t.equal(values.batched, true, "the run's store wrapper drains on demand");
  t.ok(drainsOnDemand(projectCheckpoint.AsyncBatchedStore), "the project's AsyncBatchedStore is patched");

  // Streamed messages (tuple and legacy modes) carry no internal key.
  const metadata: unknown[] = [];
  for await (const chunk of client.runs.stream(thread.thread_id, assistant.assistant_id, {
    input: { messages: [{ role: "user", content: "again" }] },
    streamMode: ["messages-tuple", "messages"],
  })) {
    if (chunk.event === "messages") metadata.push((chunk.data as unknown[])[1]);
    if (chunk.event === "messages/metadata") for (const v of Object.values(chunk.data as Record<string, { metadata: unknown }>)) metadata.push(v.metadata);
  }
  t.ok(metadata.length > 0, "messages were streamed with metadata");
  t.same(metadata.flatMap(internalKeys), [], "no internal key in streamed message metadata");

  const state = await client.threads.getState(thread.thread_id);
  t.same(internalKeys(state.metadata), [], "no internal key in the state's metadata");
  const history = await client.threads.getHistory(thread.thread_id);
  t.ok(history.length > 0, "history");
  t.same(
    history.flatMap((s) => internalKeys(s.metadata)),
    [],
    "no internal key in the history's metadata",
  );

  // A second assistant on the same graph, and an interrupt resumed with a Command.
  const second = await client.assistants.create({ graphId: "agent", name: "second", config: { configurable: { flavour: "second" } } });
  const secondThread = await client.threads.create();
  const secondValues = (await client.runs.wait(secondThread.thread_id, second.assistant_id, { input: { messages: [{ role: "user", content: "2nd" }] } })) as {
    messages?: { content: unknown }[];
  };
  t.same(
    (secondValues.messages ?? []).map((m) => m.content),
    ["2nd", "from the model", "hello from the project"],
    "the second assistant ran",
  );
  const asking = await client.threads.create();
  const interrupted = (await client.runs.wait(asking.thread_id, "asker", { input: { question: "name?" } })) as Record<string, unknown>;
  t.same(
    interrupted.__interrupt__,
    [{ id: (interrupted.__interrupt__ as { id?: string }[] | undefined)?.[0]?.id, value: { question: "name?" } }],
    "the run stops at the interrupt",
  );
  const resumed = (await client.runs.wait(asking.thread_id, "asker", { command: { resume: "Ada" } })) as Record<string, unknown>;
  t.same(resumed, { question: "name?", answer: "Ada" }, "resumed with the answer");
  const toolThread = await client.threads.create();
  const toolValues = (await client.runs.wait(toolThread.thread_id, "tools", { input: { messages: [{ role: "user", content: "2 + 3?" }] } })) as {
    messages?: { type: string; content: unknown }[];
  };
  t.same(
    (toolValues.messages ?? []).map((m) => [m.type, m.content]),
    [
      ["human", "2 + 3?"],
      ["ai", ""],
      ["tool", "5"],
      ["ai", "the sum is 5"],
    ],
    "the tool loop ran to its answer",
  );

  // Nothing was written beside the sources; the transpiled graph is in the cache.
  t.same(await listing(project), before, "no file was created in the project folder");
  const compiled = transpiledFileOf(path.join(project, "src", "agent.ts"));
  t.ok(compiled, "the graph was transpiled");
  t.equal(path.relative(project, compiled!).split(path.sep)[0], "..", "the transpiled file is not under the project");
  const inCache = [server.dataDir, tmpdir()].some((dir) => !path.relative(dir, compiled!).startsWith(".."));
  t.ok(inCache, `the transpiled file is under the data dir or the temp dir (${compiled})`);
}
