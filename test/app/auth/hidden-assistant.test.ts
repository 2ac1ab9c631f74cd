/**
 * An assistant its caller may not read (custom auth's `assistants:read` and its filters, as on
 * GET /assistants/{id}) cannot be run, through any edge: REST runs (thread, stateless, batch),
 * crons, A2A, MCP, protocol v2 `run.start`; nor shown on its agent card. Each answers as it answers
 * an unknown assistant, so neither the assistant's config nor its existence leaks. With the JWT
 * auth file of test/auth (every user owns what they create and sees only that), through the
 * official SDK where it applies. Also: joining the stream of another user's run is, as on the official
 * server, a 200 stream of one `error` event naming 404 (the same whatever the run id).
 */
import path from "node:path";
import { randomUUID } from "node:crypto";
import { fileURLToPath } from "node:url";
import t from "tap";
import { Client } from "@langchain/langgraph-sdk";
import { Client as McpClient } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpError, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { startTestServer } from "../../support/server.js";
import { rpc, textMessage } from "../../support/a2a.js";
import { signToken } from "../../auth/jwt.js";

const AUTH_PROJECT = path.join(path.join(path.dirname(fileURLToPath(import.meta.url)), "..", ".."), "auth", "langgraph.json");
const SCOPES = ["threads:read", "threads:write", "assistants:read", "assistants:write", "crons:read", "crons:write"];
const human = (content: string) => ({ role: "user", content });

const srv = await startTestServer({ env: { LANGGRAPH_JSON: AUTH_PROJECT } });
t.teardown(() => srv.close());
const tokens = { alice: await signToken("alice", SCOPES), bob: await signToken("bob", SCOPES) };
type Who = keyof typeof tokens;
const sdk = (who: Who) => new Client({ apiUrl: srv.url, defaultHeaders: { authorization: `Bearer ${tokens[who]}` } });
const alice = sdk("alice");
const bob = sdk("bob");

/** What the tests read of a JSON answer: an HTTP error's detail, or a protocol command's answer. */
interface Answer {
  detail?: string;
  message?: string;
  result?: { run_id: string };
}

async function call(who: Who | undefined, method: string, url: string, body?: unknown) {
  const headers: Record<string, string> = {};
  if (who) headers.authorization = `Bearer ${tokens[who]}`;
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(`${srv.url}${url}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  const isJson = (res.headers.get("content-type") ?? "").startsWith("application/json") && text !== "";
  return { status: res.status, headers: res.headers, json: isJson ? (JSON.parse(text) as Answer) : undefined, text };
}

async function mcpAs(who: Who): Promise<McpClient> {
  const client = new McpClient({ name: "hidden-assistant-tests", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${srv.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${tokens[who]}` } } }));
  return client;
}

const a2a = (who: Who | undefined, assistant: string, method: string, params: unknown) =>
  rpc(srv.url, assistant, { jsonrpc: "2.0", id: 1, method, params }, who ? { authorization: `Bearer ${tokens[who]}` } : {});

const SECRET = `secret-${randomUUID()}`;
const assistant = await alice.assistants.create({
  graphId: "agent",
  name: "alice private",
  description: "alice's private helper",
  config: { configurable: { secret_key: SECRET } },
});
const aid = assistant.assistant_id;
/** An assistant id nobody ever created: what bob gets for alice's must read the same. */
const unknownId = randomUUID();
const bobThread = (await bob.threads.create({ metadata: { purpose: "bob's own" } })).thread_id;
const aliceThread = (await alice.threads.create()).thread_id;
const input = { messages: [human("hello")] };
const sameAsUnknown = (hidden: string | undefined, unknown: string | undefined) => hidden !== undefined && hidden === unknown?.replaceAll(unknownId, aid);

t.test("the assistant routes: bob may not read alice's assistant, alice may", async (t) => {
  t.equal((await call("bob", "GET", `/assistants/${aid}`)).status, 404);
  t.equal((await call("alice", "GET", `/assistants/${aid}`)).status, 200);
});

t.test("every REST form of run creation: 404 for bob, as for an unknown assistant; nothing is created", async (t) => {
  const forms: [string, string, (id: string) => unknown][] = [
    ["POST", `/threads/${bobThread}/runs`, (id) => ({ assistant_id: id, input })],
    ["POST", `/threads/${bobThread}/runs/wait`, (id) => ({ assistant_id: id, input })],
    ["POST", `/threads/${bobThread}/runs/stream`, (id) => ({ assistant_id: id, input })],
    ["POST", `/thread/${bobThread}/runs/wait`, (id) => ({ assistant_id: id, input })],
    ["POST", `/runs`, (id) => ({ assistant_id: id, input, on_completion: "keep" })],
    ["POST", `/runs/wait`, (id) => ({ assistant_id: id, input, on_completion: "keep" })],
    ["POST", `/runs/stream`, (id) => ({ assistant_id: id, input, on_completion: "keep" })],
    ["POST", `/runs/batch`, (id) => [{ assistant_id: id, input, on_completion: "keep" }]],
    ["POST", `/runs/crons`, (id) => ({ assistant_id: id, schedule: "0 0 * * *", input })],
    ["POST", `/threads/${bobThread}/runs/crons`, (id) => ({ assistant_id: id, schedule: "0 0 * * *", input })],
  ];
  for (const [method, url, body] of forms) {
    const hidden = await call("bob", method, url, body(aid));
    const unknown = await call("bob", method, url, body(unknownId));
    t.equal(hidden.status, 404, `${method} ${url}: 404 (${hidden.text.slice(0, 200)})`);
    t.equal(unknown.status, 404, `${method} ${url}: an unknown assistant is 404 too`);
    t.ok(sameAsUnknown(hidden.json?.detail, unknown.json?.detail), `${method} ${url}: the same detail as an unknown assistant (${hidden.json?.detail})`);
    t.notOk(hidden.text.includes(SECRET));
  }
  // Through the official SDK.
  await t.rejects(bob.runs.create(bobThread, aid, { input }), /404/, "runs.create");
  await t.rejects(bob.runs.wait(bobThread, aid, { input }), /404/, "runs.wait");
  await t.rejects(bob.runs.wait(null, aid, { input }), /404/, "stateless runs.wait");
  await t.rejects(
    (async () => {
      for await (const _ of bob.runs.stream(bobThread, aid, { input })) void _;
    })(),
    /404/,
    "runs.stream",
  );
  await t.rejects(bob.crons.create(aid, { schedule: "0 0 * * *" }), /404/, "crons.create");
  await t.rejects(bob.crons.createForThread(bobThread, aid, { schedule: "0 0 * * *" }), /404/, "crons.createForThread");
  // Nothing bob tried left a run, a thread or a cron.
  t.same(await bob.runs.list(bobThread), [], "no run on bob's thread");
  t.same(
    (await bob.threads.search({ limit: 100 })).map((x) => x.thread_id),
    [bobThread],
    "no thread made for a stateless run",
  );
  t.same(await bob.crons.search(), [], "no cron");
});

t.test("alice runs her assistant through each of the same forms", async (t) => {
  const run = await alice.runs.create(aliceThread, aid, { input });
  t.equal(((await alice.runs.join(aliceThread, run.run_id)) as { messages: unknown[] }).messages.length, 2);
  t.match(await alice.runs.wait(aliceThread, aid, { input }), { messages: Array });
  const streamed: string[] = [];
  for await (const chunk of alice.runs.stream(aliceThread, aid, { input })) streamed.push(chunk.event);
  t.ok(streamed.includes("values") && !streamed.includes("error"), `thread runs.stream: ${streamed}`);
  t.match(await alice.runs.wait(null, aid, { input }), { messages: Array }, "stateless runs.wait");
  const statelessStream: string[] = [];
  for await (const chunk of alice.runs.stream(null, aid, { input })) statelessStream.push(chunk.event);
  t.ok(statelessStream.includes("values") && !statelessStream.includes("error"), `stateless runs.stream: ${statelessStream}`);
  t.equal((await call("alice", "POST", "/runs", { assistant_id: aid, input })).status, 200, "POST /runs");
  t.equal((await call("alice", "POST", "/runs/batch", [{ assistant_id: aid, input }])).status, 200, "POST /runs/batch");
  const cron = await alice.crons.create(aid, { schedule: "0 0 * * *" });
  const threadCron = await alice.crons.createForThread(aliceThread, aid, { schedule: "0 0 * * *" });
  t.equal(cron.assistant_id, aid);
  t.equal(threadCron.assistant_id, aid);
  await alice.crons.delete(cron.cron_id);
  await alice.crons.delete(threadCron.cron_id);
  // Her runs carry her assistant's config: what the scan of bob's view below must not find.
  const { kwargs } = (await alice.runs.get(aliceThread, run.run_id)) as unknown as { kwargs: { config: { configurable: Record<string, unknown> } } };
  t.equal(kwargs.config.configurable.secret_key, SECRET);
});

t.test("A2A: message/send and message/stream on alice's assistant are bob's -32602, as an unknown assistant", async (t) => {
  const sent = await a2a("bob", aid, "message/send", { message: textMessage("hi") });
  const unknownSent = await a2a("bob", unknownId, "message/send", { message: textMessage("hi") });
  t.equal(sent.status, 200);
  t.equal(sent.json.error?.code, -32602, JSON.stringify(sent.json));
  t.ok(sameAsUnknown(sent.json.error?.message, unknownSent.json.error?.message), `the same message as an unknown assistant: ${sent.json.error?.message}`);
  const streamed = await a2a("bob", aid, "message/stream", { message: textMessage("hi") });
  const unknownStreamed = await a2a("bob", unknownId, "message/stream", { message: textMessage("hi") });
  t.equal(streamed.events.length, 1, "one event: the error");
  t.equal(streamed.events[0]?.error?.code, -32602, JSON.stringify(streamed.events));
  t.ok(sameAsUnknown(streamed.events[0]?.error?.message, unknownStreamed.events[0]?.error?.message), "the same message as an unknown assistant");
  t.notOk(sent.text.includes(SECRET) || streamed.text.includes(SECRET));
  const get = await a2a("bob", aid, "tasks/get", { id: randomUUID() });
  t.equal(get.json.error?.code, -32602, "any operation under the hidden assistant");
  // Alice reaches her own assistant over A2A.
  const mine = await a2a("alice", aid, "message/send", { message: textMessage("mine") });
  t.equal(mine.json.result?.status?.state, "completed", JSON.stringify(mine.json));
  const mineStreamed = await a2a("alice", aid, "message/stream", { message: textMessage("mine") });
  t.ok(mineStreamed.events.length > 1 && mineStreamed.events.every((e) => e.error === undefined), "alice's stream has no error");
});

t.test("MCP: alice's assistant is no tool of bob's; it is alice's", async (t) => {
  const bobMcp = await mcpAs("bob");
  t.teardown(() => bobMcp.close());
  const bobTools = (await bobMcp.listTools()).tools;
  t.notOk(
    bobTools.some((x) => x.name === "alice_private" || x.description === "alice's private helper"),
    "tools/list does not list it",
  );
  const refused = await bobMcp.callTool({ name: "alice_private", arguments: { messages: [human("x")] } }).catch((e: unknown) => e);
  t.ok(refused instanceof McpError, "tools/call is refused");
  t.equal((refused as McpError).code, -32602);
  t.notOk(String((refused as McpError).message).includes(SECRET));
  const aliceMcp = await mcpAs("alice");
  t.teardown(() => aliceMcp.close());
  t.ok(
    (await aliceMcp.listTools()).tools.some((x) => x.name === "alice_private"),
    "alice's own tool",
  );
  const result = (await aliceMcp.callTool({ name: "alice_private", arguments: { messages: [human("via mcp")] } })) as CallToolResult;
  t.notOk(result.isError, JSON.stringify(result.content));
});

t.test("protocol v2 run.start: bob's command is refused as for an unknown assistant, and makes no thread", async (t) => {
  const command = (who: Who, threadId: string, assistantId: string) =>
    call(who, "POST", `/threads/${threadId}/commands`, { id: 1, method: "run.start", params: { assistant_id: assistantId, input } });
  const fresh = randomUUID();
  const hidden = await command("bob", fresh, aid);
  const unknown = await command("bob", fresh, unknownId);
  t.equal(hidden.status, 200);
  t.match(hidden.json, { type: "error", id: 1, error: "invalid_argument" });
  t.ok(sameAsUnknown(hidden.json?.message, unknown.json?.message), `the same message as an unknown assistant: ${hidden.json?.message}`);
  t.equal((await call("bob", "GET", `/threads/${fresh}`)).status, 404, "the thread run.start would make was not made");
  const onOwn = await command("bob", bobThread, aid);
  t.match(onOwn.json, { type: "error", error: "invalid_argument" }, "on bob's own thread too");
  const hers = randomUUID();
  const started = await command("alice", hers, aid);
  t.match(started.json, { type: "success", id: 1, result: { run_id: String } }, JSON.stringify(started.json));
  const done = (await alice.runs.join(hers, started.json!.result!.run_id)) as { messages?: unknown[] };
  t.ok(done.messages?.length, "alice's run.start ran her assistant");
});

t.test("the agent card: authenticated under custom auth, 404 for who may not read the assistant", async (t) => {
  const cardUrls = [`/.well-known/agent-card.json?assistant_id=${aid}`, `/a2a/${aid}/.well-known/agent-card.json`];
  for (const url of cardUrls) {
    const bobs = await call("bob", "GET", url);
    const unknown = await call("bob", "GET", url.replaceAll(aid, unknownId));
    t.equal(bobs.status, 404, `bob: ${url}`);
    t.ok(sameAsUnknown(bobs.json?.detail, unknown.json?.detail), `the same detail as an unknown assistant: ${bobs.json?.detail}`);
    t.notOk(bobs.text.includes("alice private") || bobs.text.includes("alice's private helper"), "nothing of the assistant");
    const anonymous = await call(undefined, "GET", url);
    t.same([anonymous.status, anonymous.json], [401, { detail: "Missing bearer token" }], `anonymous: ${url}`);
    t.equal(anonymous.headers.get("www-authenticate"), "Bearer", "the handler's challenge");
    const hers = await call("alice", "GET", url);
    t.equal(hers.status, 200, `alice: ${url}`);
    t.match(hers.json, { name: "alice private", description: "alice's private helper" });
  }
  const forged = await fetch(`${srv.url}${cardUrls[0]}`, { headers: { authorization: "Bearer abc.def.ghi" } });
  t.equal(forged.status, 401, "a bad token is the handler's 401");
  // A graph's default assistant: every user's card, as every user may run it.
  for (const who of ["alice", "bob"] as const) {
    const card = await call(who, "GET", "/.well-known/agent-card.json?assistant_id=agent");
    t.equal(card.status, 200, `${who}: the default assistant's card`);
  }
});

t.test("joining the stream of another user's run: 200 and one `error` event naming 404, as the official server", async (t) => {
  const run = await alice.runs.create(aliceThread, aid, { input });
  await alice.runs.join(aliceThread, run.run_id);
  const hidden = 'event: error\r\ndata: {"error":"Error","message":"404: Thread not found"}\r\n\r\n';
  const joined = await call("bob", "GET", `/threads/${aliceThread}/runs/${run.run_id}/stream`);
  t.equal(joined.status, 200);
  t.match(joined.headers.get("content-type"), /^text\/event-stream/);
  t.equal(joined.text, hidden, "one error event, then the end: nothing of the run");
  const made = await call("bob", "GET", `/threads/${aliceThread}/runs/${unknownId}/stream`);
  t.same([made.status, made.text], [200, hidden], "the same for a run id that is not there: the run's existence does not show");
  const unknown = await call("bob", "GET", `/threads/${bobThread}/runs/${run.run_id}/stream`);
  t.same([unknown.status, unknown.text], [200, 'event: error\r\ndata: "Run not found"\r\n\r\n'], "on bob's own thread: no such run there");
  const chunks: { event: string; data: unknown }[] = [];
  for await (const chunk of bob.runs.joinStream(aliceThread, run.run_id)) chunks.push({ event: chunk.event, data: chunk.data });
  t.same(chunks, [{ event: "error", data: { error: "Error", message: "404: Thread not found" } }], "the SDK's joinStream yields the one error event");
  const own: string[] = [];
  for await (const chunk of alice.runs.joinStream(aliceThread, run.run_id)) own.push(chunk.event);
  t.notOk(own.includes("error"), "the owner joins the same stream");
  t.ok(own.length > 0, `the owner's stream has the run's events (${own.join(", ")})`);
});

t.test("graph defaults: readable and runnable by every user; a user's own `created_by: system` hides nothing less", async (t) => {
  t.equal((await call("bob", "GET", "/assistants/agent")).status, 200, "bob reads the default assistant by graph id");
  t.match(await bob.runs.wait(bobThread, "agent", { input }), { messages: Array }, "and runs it");
  // An assistant bob stamps `created_by: system` is still his: hidden from alice, on reads and runs alike.
  const forged = await bob.assistants.create({ graphId: "agent", metadata: { created_by: "system" }, config: { configurable: { secret_key: "bob's" } } });
  t.equal((await call("alice", "GET", `/assistants/${forged.assistant_id}`)).status, 404);
  t.equal((await call("alice", "POST", `/threads/${aliceThread}/runs`, { assistant_id: forged.assistant_id })).status, 404);
  // A handler's refusal of `assistants:read` is the run's refusal too, as on GET /assistants/{id}.
  const noRead = await signToken("carol", ["threads:read", "threads:write"]);
  const carolThread = await fetch(`${srv.url}/threads`, {
    method: "POST",
    headers: { authorization: `Bearer ${noRead}`, "content-type": "application/json" },
    body: "{}",
  });
  const { thread_id } = (await carolThread.json()) as { thread_id: string };
  const refused = await fetch(`${srv.url}/threads/${thread_id}/runs`, {
    method: "POST",
    headers: { authorization: `Bearer ${noRead}`, "content-type": "application/json" },
    body: JSON.stringify({ assistant_id: "agent" }),
  });
  t.same([refused.status, await refused.json()], [403, { detail: "Missing scope assistants:read" }]);
});

t.test("the secret is in nothing bob can read (and alice's view of the same kinds of things holds it)", async (t) => {
  async function everything(who: Who, client: Client): Promise<string> {
    const seen: unknown[] = [];
    const threads = await client.threads.search({ limit: 100 });
    seen.push(threads, await client.assistants.search({ limit: 100 }), await client.crons.search());
    for (const thread of threads) {
      const tid = thread.thread_id;
      seen.push(await client.threads.get(tid), await client.threads.getState(tid), await client.threads.getHistory(tid, { limit: 100 }));
      const runs = await client.runs.list(tid, { limit: 100 });
      seen.push(runs);
      for (const run of runs) seen.push(await client.runs.get(tid, run.run_id));
      seen.push((await call(who, "GET", `/threads/${tid}/events?limit=1000`)).text);
    }
    return JSON.stringify(seen);
  }
  const bobs = await everything("bob", bob);
  t.ok(bobs.includes(bobThread), "the scan saw bob's thread");
  t.notOk(bobs.includes(SECRET), "no trace of alice's secret");
  t.notOk(bobs.includes(aid), "no trace of alice's assistant");
  t.ok((await everything("alice", alice)).includes(SECRET), "the same scan finds the secret where it may be read");
});
