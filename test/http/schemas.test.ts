import t from "tap";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { repoRoot, startTestServer } from "../support/server.js";

/**
 * /assistants/{id}/schemas and /subgraphs: zod v4 (registry extras), zod v3, Annotation, no
 * schema, and the graphs whose TypeScript types tell their schemas (the official server's own
 * expectations for its test graphs nested.mts, simple_runtime.mts, agent.mts).
 */

const PARITY = path.join(repoRoot, "test", "graphs", "parity", "langgraph.json");
/** The official suite's `BASE_MESSAGE_REF` (tests/schema-expectations.mts). */
const BASE_MESSAGE_REF = "#/definitions/BaseMessage<MessageStructure<MessageToolSet>,MessageType>";
const DRAFT_07 = "http://json-schema.org/draft-07/schema#";

t.test("schemas through the SDK", async (t) => {
  const srv = await startTestServer({ env: { LANGGRAPH_JSON: PARITY } });
  t.teardown(() => srv.close());
  const client = srv.client;

  t.test("zod v4 with LangGraph registry metadata and a context schema", async (t) => {
    const s = await client.assistants.getSchemas("zod4");
    t.equal(s.graph_id, "zod4");
    t.match(
      s.state_schema,
      {
        type: "object",
        properties: { items: { type: "string", langgraph_type: "messages", title: "Items" }, count: { type: "number" }, status: { enum: ["idle", "busy"] } },
      },
      "the update schema, as the official server: a reduced field takes its reducer's input",
    );
    t.notOk((s.state_schema as { required?: string[] }).required?.includes("count"), "the state schema is the update schema (nothing with a default required)");
    t.match(
      s.input_schema,
      { type: "object", properties: { items: { type: "string", langgraph_type: "messages" }, count: {}, status: {} } },
      "input takes the reducer's update type",
    );
    t.match(s.output_schema, { type: "object", properties: { items: { type: "array" }, count: { type: "number" } } });
    t.match(s.config_schema, { type: "object", properties: { model: { type: "string", description: "The model to call" } } });
    t.same(s.context_schema, s.config_schema, "context_schema = config_schema, as the JS server");

    const subgraphs = (await client.assistants.getSubgraphs("zod4")) as unknown as Record<string, Record<string, unknown>>;
    t.same(Object.keys(subgraphs), ["inner"]);
    t.match(
      subgraphs.inner,
      {
        state: { properties: { inner_note: { type: "string" } } },
        state_schema: { properties: { inner_note: { type: "string" } } },
        input: { properties: { inner_note: {} } },
        input_schema: { properties: { inner_note: {} } },
      },
      "the JS shape and the Python shape side by side",
    );
  });

  t.test("zod v3 converted directly", async (t) => {
    const s = await client.assistants.getSchemas("zod3");
    t.match(s.state_schema, { type: "object", properties: { question: { type: "string" }, answer: { type: "string" } } });
    t.match(s.input_schema, { properties: { question: { type: "string" } } });
    t.equal(s.config_schema, null);
  });

  t.test("Annotation: typed from the TypeScript types, messages channels marked", async (t) => {
    const s = await client.assistants.getSchemas("annotation");
    const state = s.state_schema as { properties: Record<string, unknown>; definitions: Record<string, unknown> };
    t.same(
      state.properties,
      {
        tags: { type: "array", items: { type: "string" } },
        score: { type: "number" },
        note: { type: "string" },
        messages: { type: "array", items: { $ref: BASE_MESSAGE_REF }, langgraph_type: "messages" },
      },
      "each channel's declared type (the channel's runtime guess said only `{}` for note and `array` for tags)",
    );
    t.ok(state.definitions["BaseMessage<MessageStructure<MessageToolSet>,MessageType>"], "the message type is defined");
    t.same(s.input_schema, s.state_schema);
    t.same(s.config_schema, { type: "object", $schema: DRAFT_07 }, "no config annotation: an empty object, as the official JS server's parser answers");
  });

  t.test("TypeScript types: an Annotation config schema, messages as BaseMessage references", async (t) => {
    const s = await client.assistants.getSchemas("configured");
    t.match(s.config_schema, { type: "object", properties: { model_name: { type: "string" } }, $schema: DRAFT_07 });
    t.same(s.context_schema, s.config_schema, "context_schema = config_schema, as the JS server");
    t.match(s.state_schema, {
      type: "object",
      properties: { messages: { type: "array", items: { $ref: BASE_MESSAGE_REF } }, sharedStateValue: { type: ["null", "string"] } },
      $schema: DRAFT_07,
    });
    const definitions = (s.state_schema as { definitions: Record<string, { description?: string; oneOf?: unknown[] }> }).definitions;
    t.match(definitions["BaseMessage<MessageStructure<MessageToolSet>,MessageType>"], {
      description: /Base class for all types of messages/,
      oneOf: [{ $ref: "#/definitions/RemoveMessage" }],
    });
    t.notOk(JSON.stringify(s).includes("node_modules"), "no path of this machine in the definitions");
    t.match(s.input_schema, { type: "object", properties: { messages: { type: "array" }, sharedStateValue: {} } });
    t.match(s.output_schema, { type: "object", properties: { messages: { type: "array" }, sharedStateValue: {} } });
  });

  t.test("TypeScript types: the context annotation of a runtime graph", async (t) => {
    const s = await client.assistants.getSchemas("simple_runtime");
    const model = { type: "string", enum: ["anthropic", "openai", "unknown"] };
    t.match(s.config_schema, { type: "object", properties: { model } });
    t.match(s.context_schema, { type: "object", properties: { model } });
    t.match(s.state_schema, { type: "object", properties: { message: { type: "string" }, model } });
  });

  t.test("TypeScript types: Annotation subgraphs get their property types", async (t) => {
    const top = (await client.assistants.getSubgraphs("nested")) as unknown as Record<string, Record<string, unknown>>;
    t.same(Object.keys(top), ["gp_two"]);
    const recursive = (await client.assistants.getSubgraphs("nested", { recurse: true })) as unknown as Record<string, Record<string, unknown>>;
    t.same(Object.keys(recursive), ["gp_two", "gp_two|p_two"]);
    t.match(recursive, {
      gp_two: {
        state: {
          type: "object",
          properties: { parent: { type: "string", enum: ["parent_one", "parent_two"] }, messages: { type: "array", items: { type: "string" } } },
        },
      },
      "gp_two|p_two": { state: { type: "object", properties: { child: { type: "string", enum: ["child_one", "child_two"] }, messages: { type: "array" } } } },
    });
    t.same(recursive["gp_two|p_two"].state_schema, recursive["gp_two|p_two"].state, "the Python key holds the same schema");
    const root = await client.assistants.getSchemas("nested");
    t.match(root.state_schema, { properties: { messages: { type: "array", items: { type: "string" } } } });
    t.notOk((root.state_schema as { properties: Record<string, unknown> }).properties.parent, "the root's own state only");
    const reexported = await client.assistants.getSchemas("reexported");
    t.same(reexported.state_schema, root.state_schema, "a re-exported graph's types are read through its module");
  });

  t.test("a functional graph: its entrypoint's input type, and null where the types say nothing", async (t) => {
    const s = await client.assistants.getSchemas("functional");
    t.same(s, {
      graph_id: "functional",
      input_schema: null,
      output_schema: null,
      state_schema: { type: "object", properties: { n: { type: "number" } }, $schema: DRAFT_07 },
      config_schema: null,
      context_schema: null,
    });
  });

  t.test("subgraphs recurse, StateSchema subgraphs included", async (t) => {
    const recursive = (await client.assistants.getSubgraphs("subgraph", { recurse: true })) as unknown as Record<string, Record<string, unknown>>;
    t.same(Object.keys(recursive).sort(), ["child", "child|grandchild"]);
    t.match(recursive["child|grandchild"], { state: { properties: { messages: {} } }, state_schema: { properties: { messages: {} } } });
  });
});

t.test("type schemas are cached in DATA_DIR by the graph file's content", async (t) => {
  // The project lives inside the repository so that its imports resolve to the server's packages.
  const project = await mkdtemp(path.join(repoRoot, ".scratch-type-schemas-"));
  t.teardown(() => rm(project, { recursive: true, force: true }));
  const graphFile = path.join(project, "graph.ts");
  const graphSource = (comment: string) => `// ${comment}
import { Annotation, START, StateGraph } from "@langchain/langgraph";
const State = Annotation.Root({ topic: Annotation<string> });
export const graph = new StateGraph(State).addNode("n", () => ({})).addEdge(START, "n").compile();
`;
  await writeFile(graphFile, graphSource("first"));
  await writeFile(path.join(project, "langgraph.json"), JSON.stringify({ graphs: { cached: "./graph.ts:graph" } }));
  await mkdir(path.join(project, "data"));
  const env = { LANGGRAPH_JSON: path.join(project, "langgraph.json") };

  let srv = await startTestServer({ env, dataDir: path.join(project, "data") });
  t.teardown(() => srv.close());
  t.match((await srv.client.assistants.getSchemas("cached")).state_schema, { properties: { topic: { type: "string" } } });
  const cacheDir = path.join(srv.dataDir, "type-schemas");
  const entries = (await readdir(cacheDir)).filter((f) => f.endsWith(".json"));
  t.equal(entries.length, 1, "one cache entry for the graph");

  // Marked by hand: a restart that answers the mark read the cache, not the file.
  const entryFile = path.join(cacheDir, entries[0]);
  const entry = JSON.parse(await readFile(entryFile, "utf8"));
  t.ok(entry.files[graphFile], "the entry names the file it was read from");
  entry.graphs.graph.state.properties.topic.description = "from the cache";
  await writeFile(entryFile, JSON.stringify(entry));
  srv = await srv.restart();
  t.match((await srv.client.assistants.getSchemas("cached")).state_schema, { properties: { topic: { type: "string", description: "from the cache" } } });

  // A changed file is read again.
  await writeFile(graphFile, graphSource("changed"));
  srv = await srv.restart();
  const after = (await srv.client.assistants.getSchemas("cached")).state_schema as { properties: { topic: Record<string, unknown> } };
  t.same(after.properties.topic, { type: "string" }, "the new content's schema, not the marked entry");
});

t.test("close() during a TypeScript pass ends it: the waiting request gets the runtime's schemas", async (t) => {
  const srv = await startTestServer({ env: { LANGGRAPH_JSON: PARITY } });
  let closed = false;
  t.teardown(() => (closed ? undefined : srv.close()));
  const asked = fetch(`${srv.url}/assistants/configured/schemas`).then(async (res) => ({
    status: res.status,
    body: (await res.json()) as { state_schema: unknown; config_schema: unknown },
  }));
  // No event tells that the pass started: poll its counter, with a deadline.
  const deadline = Date.now() + 10_000;
  while (srv.server.typeSchemas.passes === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  t.equal(srv.server.typeSchemas.passes, 1, "the pass is under way");
  const started = Date.now();
  await srv.close();
  closed = true;
  t.ok(Date.now() - started < 10_000, `close() did not wait for the pass (${Date.now() - started} ms)`);
  const { status, body } = await asked;
  t.equal(status, 200);
  t.match(
    body.state_schema,
    { properties: { messages: { langgraph_type: "messages", items: { type: "object" } }, sharedStateValue: {} } },
    "the channels' schema",
  );
  t.equal(body.config_schema, null);
});
