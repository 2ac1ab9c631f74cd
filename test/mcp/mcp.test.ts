/**
 * MCP at `/mcp` (Streamable HTTP, stateless, JSON responses), through the official
 * `@modelcontextprotocol/sdk` client and raw requests against a real server: every assistant a
 * tool, a call a stateless run of it; the protocol's errors; the API key, custom auth, disable_mcp.
 */
import path from "node:path";
import { fileURLToPath } from "node:url";
import t from "tap";
import { Client as McpClient } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpError, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { Client } from "@langchain/langgraph-sdk";
import { startTestServer } from "../support/server.js";
import { signToken } from "../auth/jwt.js";
import { TOOL_NAME, toolNameOf, uniqueToolNames } from "../../src/mcp/tool-names.js";
import { splitArguments, toolInput } from "../../src/mcp/tool-schema.js";
import { toolResult } from "../../src/mcp/tool-result.js";
import { headerVersion, negotiate } from "../../src/mcp/protocol.js";

const here = path.join(path.dirname(fileURLToPath(import.meta.url)), "..");
const MCP_PROJECT = path.join(here, "mcp", "langgraph.json");
const AUTH_PROJECT = path.join(here, "auth", "langgraph.json");
const DISABLED_PROJECT = path.join(here, "mcp", "disabled.json");

async function connect(url: string, headers: Record<string, string> = {}): Promise<McpClient> {
  const client = new McpClient({ name: "agent-server-tests", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers } }));
  return client;
}

/** The text of a tool result's only content block (which must be text). */
function textOf(result: CallToolResult): string {
  const [block, ...more] = result.content;
  if (more.length > 0 || block?.type !== "text") throw new Error(`one text block expected: ${JSON.stringify(result.content)}`);
  return block.text;
}

/** A raw JSON-RPC POST (no client): status, content type and parsed body. */
async function post(url: string, body: string, headers: Record<string, string> = {}) {
  const res = await fetch(`${url}/mcp`, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers },
    body,
  });
  const text = await res.text();
  return { status: res.status, type: res.headers.get("content-type"), text, json: text ? JSON.parse(text) : undefined };
}
const rpc = (method: string, params?: unknown, id: number | string = 1) =>
  JSON.stringify({ jsonrpc: "2.0", id, method, ...(params === undefined ? {} : { params }) });

t.test("tool names are valid MCP names, unique in order", async (t) => {
  t.equal(toolNameOf("My agent!"), "My_agent_");
  t.equal(toolNameOf("  "), "assistant");
  t.equal(toolNameOf("x".repeat(80)).length, 64);
  const names = uniqueToolNames(["a b", "a-b", "a_b", "a b", "x".repeat(70), "x".repeat(64), "ünï"]);
  t.same(names.slice(0, 4), ["a_b", "a-b", "a_b_2", "a_b_3"]);
  t.equal(names[5], `${"x".repeat(62)}_2`, "a suffix keeps the name within 64 characters");
  t.equal(names[6], "_n_", "other characters become _");
  t.equal(new Set(names).size, names.length);
  for (const name of names) t.match(name, TOOL_NAME);
});

t.test("input schemas, results and versions (pure)", async (t) => {
  t.same(toolInput(null, null), { inputSchema: { type: "object" }, takesContext: false });
  t.same(toolInput({ type: "array" }, null).inputSchema, { type: "object" }, "MCP needs an object schema");
  const context = { $schema: "https://json-schema.org/draft/2020-12/schema", type: "object", properties: { user: { type: "string" } } };
  t.same(toolInput({ type: "object", properties: { context: { type: "string" } } }, context).takesContext, false, "an input with its own `context` keeps it");
  t.same(toolInput({ type: "object" }, { type: "object", properties: {} }).takesContext, false, "an empty context schema adds nothing");
  t.same(toolInput({ type: "object", properties: { q: {} } }, context).inputSchema.properties, {
    q: {},
    context: { type: "object", properties: { user: { type: "string" } }, description: "The run's context (the graph's context schema), not part of its input" },
  });
  t.same(splitArguments({ q: 1, context: { user: "a" } }, true), { input: { q: 1 }, context: { user: "a" } });
  t.same(splitArguments({ q: 1, context: { user: "a" } }, false), { input: { q: 1, context: { user: "a" } } });
  t.same(toolResult(["a", 1]), { content: [{ type: "text", text: '["a",1]' }] }, "JSON text; structured only for objects");
  t.same(toolResult(undefined), { content: [{ type: "text", text: "null" }] });
  t.same(toolResult({ __error__: { error: "", message: "" } }), { content: [{ type: "text", text: "The run failed" }], isError: true });
  t.equal(negotiate(undefined), "2025-11-25");
  t.equal(headerVersion(undefined), "2025-03-26", "no header: 2025-03-26, as the spec says");
  t.equal(headerVersion(["2024-11-05"]), "2024-11-05");
  t.equal(headerVersion("2024-10-07"), undefined);
});

t.test("the MCP client lists the assistants and calls them", async (t) => {
  const s = await startTestServer({ env: { LANGGRAPH_JSON: MCP_PROJECT } });
  t.teardown(() => s.close());
  // Two more assistants of the agent graph whose names make the same tool name.
  // Ids in creation order: within one millisecond, the order is the ids'.
  await s.client.assistants.create({ graphId: "agent", name: "My agent!", description: "Mine", assistantId: "11111111-1111-4111-8111-111111111111" });
  await s.client.assistants.create({ graphId: "agent", name: "My agent?", assistantId: "22222222-2222-4222-8222-222222222222" });
  const client = await connect(s.url);
  t.teardown(() => client.close());
  t.equal(client.getServerVersion()?.name, "langgraph-agent-server");
  t.same(client.getServerCapabilities()?.tools, { listChanged: false });

  const { tools, nextCursor } = await client.listTools();
  t.equal(nextCursor, undefined);
  const names = tools.map((x) => x.name);
  t.same(names.slice(0, 4).sort(), ["agent", "delay", "error", "greeter"], "the default assistants, named after their graphs");
  t.same(names.slice(4), ["My_agent_", "My_agent__2"], "oldest first: the older assistant keeps the plain name");
  const byName = Object.fromEntries(tools.map((x) => [x.name, x]));
  t.equal(byName.agent.description, "Example agent (deterministic offline reply)", "the graph's description");
  t.equal(byName.My_agent_.description, "Mine", "the assistant's description");
  t.equal(byName.My_agent_.title, "My agent!");
  t.equal(byName.My_agent__2.description, byName.agent.description, "no description of its own: its graph's");
  t.same(
    byName.agent.inputSchema,
    { type: "object", properties: { messages: { langgraph_type: "messages", description: "A list of chat messages" } } },
    "the graph's input schema",
  );
  t.match(
    byName.greeter.inputSchema,
    { type: "object", properties: { messages: {}, context: { type: "object", properties: { user_name: { type: "string" } }, required: ["user_name"] } } },
    "a context schema is offered as `context`",
  );
  for (const tool of tools) t.match(tool.name, TOOL_NAME);

  await t.test("calling the example graph returns its output as JSON", async (t) => {
    const result = (await client.callTool({ name: "agent", arguments: { messages: [{ role: "user", content: "hello over MCP" }] } })) as CallToolResult;
    t.notOk(result.isError);
    const output = JSON.parse(textOf(result));
    t.match(output.messages, [
      { type: "human", content: "hello over MCP" },
      { type: "ai", content: "You said: hello over MCP", id: "ai-1" },
    ]);
    t.same(result.structuredContent, output, "the same output, structured");
    // A stateless run: its temporary thread is gone once it ended.
    t.same(await s.client.threads.search({ limit: 10 }), []);
  });

  await t.test("each assistant is its own tool; a context argument is the run's context", async (t) => {
    const mine = (await client.callTool({ name: "My_agent__2", arguments: { messages: [{ role: "user", content: "second" }] } })) as CallToolResult;
    t.equal(JSON.parse(textOf(mine)).messages[1].content, "You said: second");
    const greeted = (await client.callTool({
      name: "greeter",
      arguments: { messages: [{ role: "user", content: "hi" }], context: { user_name: "Ada" } },
    })) as CallToolResult;
    t.notOk(greeted.isError);
    const output = JSON.parse(textOf(greeted));
    t.equal(output.messages.at(-1).content, "Hello Ada: hi");
    t.notOk("context" in output, "the context is not in the state");
  });

  await t.test("a run that fails is a tool error with its message", async (t) => {
    const result = (await client.callTool({ name: "error", arguments: { messages: [{ role: "user", content: "x" }] } })) as CallToolResult;
    t.equal(result.isError, true);
    t.equal(textOf(result), "CustomError: Boo!");
  });

  await t.test("a client that goes away cancels its run", async (t) => {
    const gone = new AbortController();
    const call = fetch(`${s.url}/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: rpc("tools/call", { name: "delay", arguments: { delay: 60_000 } }),
      signal: gone.signal,
    }).catch((e: unknown) => e);
    // No event tells a client that a run started: poll its temporary thread, with a deadline.
    const until = async (what: string, done: () => Promise<boolean>) => {
      const deadline = Date.now() + 20_000;
      while (!(await done())) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    let threadId = "";
    await until("the run to start", async () => {
      const [thread] = await s.client.threads.search({ limit: 1 });
      threadId = thread?.status === "busy" ? thread.thread_id : "";
      return threadId !== "";
    });
    gone.abort();
    t.ok((await call) instanceof Error, "the request was aborted");
    // Cancelled long before its 60 s delay: the run ends and its temporary thread is deleted.
    await until("the run to be cancelled", async () => (await s.client.threads.search({ limit: 1 })).length === 0);
    t.pass(`thread ${threadId} gone`);
  });

  await t.test("an unknown tool and bad params are protocol errors", async (t) => {
    const unknown = await client.callTool({ name: "nope", arguments: {} }).catch((e: unknown) => e);
    t.ok(unknown instanceof McpError);
    t.equal((unknown as McpError).code, -32602);
    t.match((unknown as McpError).message, /Unknown tool: nope/);
  });
});

t.test("the transport and JSON-RPC rules, raw", async (t) => {
  const s = await startTestServer({ env: { LANGGRAPH_JSON: MCP_PROJECT } });
  t.teardown(() => s.close());

  await t.test("initialize answers the client's version when supported, else the latest", async (t) => {
    for (const [asked, answered] of [
      ["2024-11-05", "2024-11-05"],
      ["2025-03-26", "2025-03-26"],
      ["2025-06-18", "2025-06-18"],
      ["2025-11-25", "2025-11-25"],
      ["2099-01-01", "2025-11-25"],
    ]) {
      const res = await post(s.url, rpc("initialize", { protocolVersion: asked, capabilities: {}, clientInfo: { name: "raw", version: "0" } }));
      t.equal(res.status, 200);
      t.match(res.type, /^application\/json/);
      t.equal(res.json.result.protocolVersion, answered, `asked ${asked}`);
      t.same(res.json.result.capabilities, { tools: { listChanged: false } });
      t.equal(res.json.id, 1);
    }
    const noVersion = await post(s.url, rpc("initialize", {}));
    t.equal(noVersion.json.error.code, -32602);
  });

  await t.test("ping; notifications and responses are accepted with 202 and no body", async (t) => {
    t.same((await post(s.url, rpc("ping", undefined, "p"))).json, { jsonrpc: "2.0", id: "p", result: {} });
    for (const body of [
      { jsonrpc: "2.0", method: "notifications/initialized" },
      { jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: 1 } },
      { jsonrpc: "2.0", id: 7, result: {} },
    ]) {
      const res = await post(s.url, JSON.stringify(body));
      t.equal(res.status, 202, JSON.stringify(body));
      t.equal(res.text, "");
    }
  });

  await t.test("errors: -32601, -32700, -32600, -32602; never a 5xx", async (t) => {
    const unknown = await post(s.url, rpc("resources/list"));
    t.equal(unknown.status, 200);
    t.same(unknown.json, { jsonrpc: "2.0", id: 1, error: { code: -32601, message: "Method not found: resources/list" } });
    for (const bad of ["{not json", "", "[]"]) {
      const res = await post(s.url, bad);
      t.equal(res.status, 400, JSON.stringify(bad));
      t.equal(res.json.id, null);
      t.equal(res.json.error.code, bad === "[]" ? -32600 : -32700);
    }
    const notObject = await post(s.url, "42");
    t.equal(notObject.status, 400);
    t.equal(notObject.json.error.code, -32600);
    const badVersion = await post(s.url, JSON.stringify({ jsonrpc: "1.0", id: 3, method: "ping" }));
    t.same([badVersion.status, badVersion.json.id, badVersion.json.error.code], [400, 3, -32600]);
    const nullId = await post(s.url, JSON.stringify({ jsonrpc: "2.0", id: null, method: "ping" }));
    t.equal(nullId.json.error.code, -32600, "an MCP request id is never null");
    for (const params of [{}, { name: 5 }, { name: "agent", arguments: [1] }]) {
      const res = await post(s.url, rpc("tools/call", params));
      t.equal(res.status, 200);
      t.equal(res.json.error.code, -32602, JSON.stringify(params));
    }
    t.equal((await post(s.url, rpc("tools/list", { cursor: "zzz" }))).json.error.code, -32602, "an unknown cursor");
    t.equal((await post(s.url, JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping", params: [1] }))).json.error.code, -32602);
  });

  await t.test("a batch gets one response per request, in an array", async (t) => {
    const res = await post(
      s.url,
      JSON.stringify([
        { jsonrpc: "2.0", id: 1, method: "ping" },
        { jsonrpc: "2.0", method: "notifications/initialized" },
        { jsonrpc: "2.0", id: 2, method: "nope" },
      ]),
    );
    t.equal(res.status, 200);
    t.same(res.json, [
      { jsonrpc: "2.0", id: 1, result: {} },
      { jsonrpc: "2.0", id: 2, error: { code: -32601, message: "Method not found: nope" } },
    ]);
    t.equal((await post(s.url, JSON.stringify([{ jsonrpc: "2.0", method: "notifications/initialized" }]))).status, 202);
  });

  await t.test("MCP-Protocol-Version: a version we do not speak is a 400", async (t) => {
    const res = await post(s.url, rpc("ping"), { "mcp-protocol-version": "1999-01-01" });
    t.equal(res.status, 400);
    t.match(res.json.error.message, /unsupported MCP-Protocol-Version/);
    t.equal((await post(s.url, rpc("ping"), { "mcp-protocol-version": "2025-06-18" })).status, 200);
  });

  await t.test("GET and DELETE /mcp answer 405 (no stream, no session)", async (t) => {
    for (const method of ["GET", "DELETE"]) {
      const res = await fetch(`${s.url}/mcp`, { method, headers: { accept: "text/event-stream" } });
      t.equal(res.status, 405, method);
      t.equal(res.headers.get("allow"), "POST");
      t.equal(((await res.json()) as { error: { code: number } }).error.code, -32600);
    }
  });
});

t.test("the API key is required when set", async (t) => {
  const s = await startTestServer({ env: { LANGGRAPH_JSON: MCP_PROJECT, LANGGRAPH_API_KEY: "mcp-secret" } });
  t.teardown(() => s.close());
  const refused = await post(s.url, rpc("ping"));
  t.equal(refused.status, 401);
  await t.rejects(connect(s.url), "the client cannot connect without the key");
  const client = await connect(s.url, { "x-api-key": "mcp-secret" });
  t.teardown(() => client.close());
  t.ok((await client.listTools()).tools.some((x) => x.name === "agent"));
});

t.test("custom auth: each user sees their own assistants as tools, and the run is authorized", async (t) => {
  const s = await startTestServer({ env: { LANGGRAPH_JSON: AUTH_PROJECT } });
  t.teardown(() => s.close());
  const scopes = ["threads:read", "threads:write", "assistants:read", "assistants:write"];
  const tokens = {
    alice: await signToken("alice", scopes),
    bob: await signToken("bob", scopes),
    reader: await signToken("reader", ["assistants:read", "threads:read"]),
  };
  const sdk = (token: string) => new Client({ apiUrl: s.url, defaultHeaders: { authorization: `Bearer ${token}` } });
  await sdk(tokens.alice).assistants.create({ graphId: "agent", name: "alice agent" });
  await sdk(tokens.bob).assistants.create({ graphId: "agent", name: "bob agent" });
  const reader = await sdk(tokens.reader)
    .assistants.create({ graphId: "agent", name: "reader agent" })
    .catch((e: unknown) => e);
  t.ok(reader instanceof Error, "the reader may not create assistants");

  const unauthenticated = await post(s.url, rpc("tools/list"));
  t.equal(unauthenticated.status, 401);
  t.same(unauthenticated.json, { detail: "Missing bearer token" });

  const alice = await connect(s.url, { authorization: `Bearer ${tokens.alice}` });
  t.teardown(() => alice.close());
  t.same(
    (await alice.listTools()).tools.map((x) => x.name),
    ["alice_agent"],
    "the handler's filter: her own assistants only",
  );
  const bob = await connect(s.url, { authorization: `Bearer ${tokens.bob}` });
  t.teardown(() => bob.close());
  t.same(
    (await bob.listTools()).tools.map((x) => x.name),
    ["bob_agent"],
  );

  const result = (await alice.callTool({ name: "alice_agent", arguments: { messages: [{ role: "user", content: "mine" }] } })) as CallToolResult;
  t.notOk(result.isError);
  t.equal(JSON.parse(textOf(result)).messages[1].content, "You said: mine");
  const hidden = await bob.callTool({ name: "alice_agent", arguments: {} }).catch((e: unknown) => e);
  t.equal((hidden as McpError).code, -32602, "another user's assistant is no tool of bob's");

  // The reader is a user with no assistants of its own: no tools.
  const readerClient = await connect(s.url, { authorization: `Bearer ${tokens.reader}` });
  t.teardown(() => readerClient.close());
  t.same((await readerClient.listTools()).tools, []);

  // threads:create_run runs for the call: a token without threads:write gets the handler's refusal as the tool's error.
  const noRun = await signToken("alice", ["assistants:read", "threads:read"]);
  const limited = await connect(s.url, { authorization: `Bearer ${noRun}` });
  t.teardown(() => limited.close());
  const refused = (await limited.callTool({ name: "alice_agent", arguments: { messages: [{ role: "user", content: "x" }] } })) as CallToolResult;
  t.equal(refused.isError, true);
  t.equal(textOf(refused), "Missing scope threads:write");
});

t.test("http.disable_mcp turns /mcp off", async (t) => {
  const s = await startTestServer({ env: { LANGGRAPH_JSON: DISABLED_PROJECT } });
  t.teardown(() => s.close());
  t.equal((await post(s.url, rpc("ping"))).status, 404);
  t.equal((await fetch(`${s.url}/mcp`)).status, 404);
});
