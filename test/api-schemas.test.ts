import t from "tap";
import path from "node:path";
import { repoRoot, startTestServer } from "./support/server.js";

/** /assistants/{id}/schemas and /subgraphs: zod v4 (registry extras), zod v3, Annotation, no schema. */

const PARITY = path.join(repoRoot, "test", "graphs", "parity", "langgraph.json");

t.test("schemas through the SDK", async (t) => {
  const srv = await startTestServer({ env: { LANGGRAPH_JSON: PARITY } });
  t.teardown(() => srv.close());
  const client = srv.client;

  t.test("zod v4 with LangGraph registry metadata and a context schema", async (t) => {
    const s = await client.assistants.getSchemas("zod4");
    t.equal(s.graph_id, "zod4");
    t.match(s.state_schema, {
      type: "object",
      properties: { items: { type: "string", langgraph_type: "messages", title: "Items" }, count: { type: "number" }, status: { enum: ["idle", "busy"] } },
    }, "the update schema, as the official server: a reduced field takes its reducer's input");
    t.notOk((s.state_schema as { required?: string[] }).required?.includes("count"), "the state schema is the update schema (nothing with a default required)");
    t.match(s.input_schema, { type: "object", properties: { items: { type: "string", langgraph_type: "messages" }, count: {}, status: {} } }, "input takes the reducer's update type");
    t.match(s.output_schema, { type: "object", properties: { items: { type: "array" }, count: { type: "number" } } });
    t.match(s.config_schema, { type: "object", properties: { model: { type: "string", description: "The model to call" } } });
    t.same(s.context_schema, s.config_schema, "context_schema = config_schema, as the JS server");

    const subgraphs = (await client.assistants.getSubgraphs("zod4")) as unknown as Record<string, Record<string, unknown>>;
    t.same(Object.keys(subgraphs), ["inner"]);
    t.match(subgraphs.inner, {
      state: { properties: { inner_note: { type: "string" } } },
      state_schema: { properties: { inner_note: { type: "string" } } },
      input: { properties: { inner_note: {} } },
      input_schema: { properties: { inner_note: {} } },
    }, "the JS shape and the Python shape side by side");
  });

  t.test("zod v3 converted directly", async (t) => {
    const s = await client.assistants.getSchemas("zod3");
    t.match(s.state_schema, { type: "object", properties: { question: { type: "string" }, answer: { type: "string" } } });
    t.match(s.input_schema, { properties: { question: { type: "string" } } });
    t.equal(s.config_schema, null);
  });

  t.test("Annotation: the channels, typed where the channel tells", async (t) => {
    const s = await client.assistants.getSchemas("annotation");
    t.same(s.state_schema, {
      type: "object",
      properties: {
        messages: { type: "array", items: { type: "object" }, langgraph_type: "messages", description: "A list of chat messages" },
        tags: { type: "array" },
        score: { type: "number" },
        note: {},
      },
    });
    t.same(s.input_schema, s.state_schema);
    t.equal(s.config_schema, null);
  });

  t.test("a graph without a schema gets null, never an error", async (t) => {
    const s = await client.assistants.getSchemas("functional");
    t.same(s, { graph_id: "functional", input_schema: null, output_schema: null, state_schema: null, config_schema: null, context_schema: null });
  });

  t.test("subgraphs recurse, StateSchema subgraphs included", async (t) => {
    const recursive = (await client.assistants.getSubgraphs("subgraph", { recurse: true })) as unknown as Record<string, Record<string, unknown>>;
    t.same(Object.keys(recursive).sort(), ["child", "child|grandchild"]);
    t.match(recursive["child|grandchild"], { state: { properties: { messages: {} } }, state_schema: { properties: { messages: {} } } });
  });
});
