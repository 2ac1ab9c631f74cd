import t from "tap";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@langchain/langgraph-sdk";
import { startTestServer, type TestServer } from "../../support/server.js";
import { signToken } from "../../auth/jwt.js";

/**
 * Custom auth through the official SDK against the real server, with the JWT auth file of
 * test/auth (jose): 401 and 403, ownership metadata added by the handler and stored, every
 * single-resource endpoint of another user's thread, run or assistant answering 404, and the
 * user reaching the graph through config.configurable.
 */

const AUTH_PROJECT = path.join(path.join(path.dirname(fileURLToPath(import.meta.url)), "..", ".."), "auth", "langgraph.json");
const ALL_SCOPES = ["threads:read", "threads:write", "assistants:read", "assistants:write"];
const human = (content: string) => ({ role: "user", content });

async function clientFor(srv: TestServer, token: string) {
  return new Client({ apiUrl: srv.url, defaultHeaders: { authorization: `Bearer ${token}` } });
}

async function call(srv: TestServer, method: string, url: string, token: string | undefined, body?: unknown) {
  const headers: Record<string, string> = {};
  if (token) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(`${srv.url}${url}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  const isJson = res.headers.get("content-type")?.startsWith("application/json") && text !== "";
  return { status: res.status, headers: res.headers, json: isJson ? (JSON.parse(text) as Record<string, unknown>) : undefined, text };
}

t.test("custom auth", async (t) => {
  const srv = await startTestServer({ env: { LANGGRAPH_JSON: AUTH_PROJECT } });
  t.teardown(() => srv.close());
  const aliceToken = await signToken("alice", ALL_SCOPES);
  const bobToken = await signToken("bob", ALL_SCOPES);
  const alice = await clientFor(srv, aliceToken);
  const bob = await clientFor(srv, bobToken);

  t.test("public routes need no token", async (t) => {
    for (const url of ["/ok", "/info", "/openapi.json", "/docs"]) {
      const res = await fetch(`${srv.url}${url}`);
      t.equal(res.status, 200, url);
    }
  });

  t.test("no token or a bad one: 401 with the handler's detail and WWW-Authenticate", async (t) => {
    const none = await call(srv, "POST", "/threads", undefined, {});
    t.equal(none.status, 401);
    t.same(none.json, { detail: "Missing bearer token" });
    t.equal(none.headers.get("www-authenticate"), "Bearer");
    const forged = await signToken("alice", ALL_SCOPES, { secret: new TextEncoder().encode("not-the-secret-not-the-secret-000") });
    const expired = await signToken("alice", ALL_SCOPES, { expiresIn: "-1 min" });
    for (const [name, token] of [
      ["forged", forged],
      ["expired", expired],
      ["garbage", "abc.def.ghi"],
    ]) {
      const res = await call(srv, "GET", "/threads/00000000-0000-4000-8000-000000000000", token);
      t.equal(res.status, 401, name);
      t.same(res.json, { detail: "Invalid token" }, name);
      t.equal(res.headers.get("www-authenticate"), 'Bearer error="invalid_token"');
    }
    await t.rejects(new Client({ apiUrl: srv.url }).threads.create(), /401/, "through the SDK too");
    const notFound = await call(srv, "GET", "/no/such/route", undefined);
    t.equal(notFound.status, 401, "unknown routes are not public either");
  });

  t.test("missing scopes: 403 naming the scope", async (t) => {
    const readOnly = await clientFor(srv, await signToken("carol", ["threads:read"]));
    await t.rejects(readOnly.threads.create(), /403/);
    const res = await call(srv, "POST", "/threads", await signToken("carol", ["threads:read"]), {});
    t.equal(res.status, 403);
    t.same(res.json, { detail: "Missing scope threads:write" });
    const noAssistants = await call(srv, "POST", "/assistants/search", await signToken("carol", ["threads:read"]), {});
    t.same([noAssistants.status, noAssistants.json], [403, { detail: "Missing scope assistants:read" }]);
  });

  t.test("the handler's metadata is what gets stored", async (t) => {
    const thread = await alice.threads.create({ metadata: { topic: "tea", owner: "mallory" } });
    t.same(thread.metadata, { topic: "tea", owner: "alice" }, "owner set by the handler, not the client");
    t.same((await alice.threads.get(thread.thread_id)).metadata, { topic: "tea", owner: "alice" });
    const assistant = await alice.assistants.create({ graphId: "agent", metadata: { kind: "helper" } });
    t.same(assistant.metadata, { kind: "helper", owner: "alice" });
    const run = await alice.runs.create(thread.thread_id, "agent", { input: { messages: [human("hi")] }, metadata: { source: "test" } });
    t.match(run.metadata, { source: "test", owner: "alice" });
    await alice.runs.join(thread.thread_id, run.run_id);
    const created = await alice.runs.wait(null, "agent", { input: { messages: [human("stateless")] } });
    t.ok(created, "stateless runs work for their owner");
  });

  t.test("another user's thread, runs and assistant answer 404 on every single-resource endpoint", async (t) => {
    const thread = await alice.threads.create({ metadata: { secret: true } });
    const tid = thread.thread_id;
    const run = await alice.runs.create(tid, "agent", { input: { messages: [human("mine")] } });
    await alice.runs.join(tid, run.run_id);
    const assistant = await alice.assistants.create({ graphId: "agent" });
    const aid = assistant.assistant_id;
    const created = await call(srv, "POST", "/runs", aliceToken, { assistant_id: "agent", input: { messages: [human("x")] }, on_completion: "keep" });
    const stateless = created.json as { run_id: string };

    const cases: [string, string, unknown?][] = [
      ["GET", `/threads/${tid}`],
      ["PATCH", `/threads/${tid}`, { metadata: { owner: "bob" } }],
      ["DELETE", `/threads/${tid}`],
      ["POST", `/threads/${tid}/copy`],
      ["GET", `/threads/${tid}/state`],
      ["POST", `/threads/${tid}/state`, { values: { messages: [] } }],
      ["POST", `/threads/${tid}/state/checkpoint`, { checkpoint: {} }],
      ["GET", `/threads/${tid}/history`],
      ["POST", `/threads/${tid}/history`, {}],
      ["POST", `/threads/${tid}/runs`, { assistant_id: "agent" }],
      ["POST", `/threads/${tid}/runs/wait`, { assistant_id: "agent" }],
      ["POST", `/threads/${tid}/runs/stream`, { assistant_id: "agent" }],
      ["GET", `/threads/${tid}/runs`],
      ["GET", `/threads/${tid}/runs/${run.run_id}`],
      ["GET", `/threads/${tid}/runs/${run.run_id}/join`],
      ["POST", `/threads/${tid}/runs/${run.run_id}/cancel`],
      ["DELETE", `/threads/${tid}/runs/${run.run_id}`],
      ["GET", `/thread/${tid}/runs/${run.run_id}`],
      ["GET", `/runs/${stateless.run_id}/stream`],
      ["POST", `/runs/cancel`, { run_ids: [stateless.run_id] }],
      ["GET", `/assistants/${aid}`],
      ["PATCH", `/assistants/${aid}`, { metadata: { owner: "bob" } }],
      ["DELETE", `/assistants/${aid}`],
      ["GET", `/assistants/${aid}/graph`],
      ["GET", `/assistants/${aid}/schemas`],
      ["GET", `/assistants/${aid}/subgraphs`],
      ["POST", `/assistants/${aid}/versions`, {}],
      ["POST", `/assistants/${aid}/latest`, { version: 1 }],
    ];
    for (const [method, url, body] of cases) {
      const res = await call(srv, method, url, bobToken, body);
      t.equal(res.status, 404, `${method} ${url} → 404 (${JSON.stringify(res.json)})`);
    }
    // Control: the owner reads the same resources (so the 404s above are the filters at work).
    for (const [method, url] of cases.filter(([m, u]) => m === "GET" && !u.endsWith("/join"))) {
      const res = await call(srv, method, url, aliceToken);
      t.equal(res.status, 200, `owner: ${method} ${url} → 200`);
    }
    // Joining the run's stream: as on the official server, a 200 stream of one `error` event naming 404.
    const joined = await call(srv, "GET", `/threads/${tid}/runs/${run.run_id}/stream`, bobToken);
    t.equal(joined.status, 200);
    t.match(joined.headers.get("content-type"), /^text\/event-stream/);
    t.equal(joined.text, 'event: error\r\ndata: {"error":"Error","message":"404: Thread not found"}\r\n\r\n');
    const chunks: { event: string; data: unknown }[] = [];
    for await (const chunk of bob.runs.joinStream(tid, run.run_id)) chunks.push({ event: chunk.event, data: chunk.data });
    t.same(chunks, [{ event: "error", data: { error: "Error", message: "404: Thread not found" } }], "the SDK's joinStream yields it");
    const ownStream: string[] = [];
    for await (const chunk of alice.runs.joinStream(tid, run.run_id)) ownStream.push(chunk.event);
    t.notOk(ownStream.includes("error"), "the owner joins the same stream without an error");
    const unknown = await call(srv, "GET", `/threads/00000000-0000-4000-8000-000000000000/runs/${run.run_id}/stream`, bobToken);
    t.same([unknown.status, unknown.text], [200, 'event: error\r\ndata: "Run not found"\r\n\r\n'], 'a run not on that thread: the official "Run not found"');
    const malformed = await call(srv, "GET", `/threads/${tid}/runs/not-a-uuid/stream`, bobToken);
    t.equal(malformed.status, 422, "a malformed id is still refused before any stream");
    await t.rejects(bob.threads.get(tid), /404/, "through the SDK");
    await t.rejects(bob.assistants.get(aid), /404/);
    const taken = await call(srv, "POST", "/threads", bobToken, { thread_id: tid, if_exists: "do_nothing" });
    t.equal(taken.status, 409, "creating over someone else's thread id is a conflict, not a view of it");
    t.notOk(JSON.stringify(taken.json).includes("secret"));

    // Nothing bob tried changed alice's resources.
    const after = await alice.threads.get(tid);
    t.match(after.metadata, { secret: true, owner: "alice" });
    t.equal((await alice.runs.list(tid)).length, 1);
    t.equal((await alice.assistants.get(aid)).assistant_id, aid);
  });

  t.test("copying a thread needs threads:read on the source and threads:create for the copy", async (t) => {
    const source = await alice.threads.create({ metadata: { topic: "copy me" } });
    const readOnly = await clientFor(srv, await signToken("alice", ["threads:read"]));
    t.equal((await readOnly.threads.get(source.thread_id)).thread_id, source.thread_id, "the read-only caller sees the source");
    const refused = await call(srv, "POST", `/threads/${source.thread_id}/copy`, await signToken("alice", ["threads:read"]));
    t.same([refused.status, refused.json], [403, { detail: "Missing scope threads:write" }], "the create handler's 403");
    await t.rejects(readOnly.threads.copy(source.thread_id), /403/, "through the SDK");
    t.equal((await alice.threads.search({ metadata: { topic: "copy me" } })).length, 1, "no copy was made");
    const copy = await alice.threads.copy(source.thread_id);
    t.not(copy.thread_id, source.thread_id);
    t.same(copy.metadata, { topic: "copy me", owner: "alice" }, "the copy's metadata as the create handler left it");
    t.equal((await alice.threads.get(copy.thread_id)).thread_id, copy.thread_id);
  });

  t.test("search, count and cancel-by-status show each user only their own (filters applied in SQL)", async (t) => {
    const mine = await bob.threads.create({ metadata: { tag: "isolation" } });
    const theirs = await alice.threads.create({ metadata: { tag: "isolation" } });
    const found = await bob.threads.search({ metadata: { tag: "isolation" } });
    t.same(
      found.map((x) => x.thread_id),
      [mine.thread_id],
      "threads search",
    );
    t.equal(await bob.threads.count({ metadata: { tag: "isolation" } }), 1, "threads count");
    await bob.assistants.create({ graphId: "agent", name: "bob's own" });
    await alice.assistants.create({ graphId: "agent", name: "alice's own" });
    const assistants = await bob.assistants.search({ graphId: "agent" });
    t.ok(assistants.length > 0 && assistants.every((a) => a.metadata?.owner === "bob"), "assistants search: only bob's");
    t.notOk(assistants.some((a) => a.name === "alice's own"));
    t.equal(await bob.assistants.count({ graphId: "agent" }), assistants.length, "assistants count");
    // A pending run of alice's (it starts in an hour) survives bob's "cancel every pending run".
    const pending = await alice.runs.create(theirs.thread_id, "agent", { input: { messages: [] }, afterSeconds: 3600 });
    const cancel = await call(srv, "POST", "/runs/cancel", bobToken, { status: "pending" });
    t.equal(cancel.status, 404, "bob has no pending run to cancel");
    t.equal((await alice.runs.get(theirs.thread_id, pending.run_id)).status, "pending", "alice's run was not cancelled by bob");
    await alice.runs.cancel(theirs.thread_id, pending.run_id);
  });

  t.test("graphs see langgraph_auth_user, _user_id and _permissions, which a client cannot forge", async (t) => {
    const thread = await alice.threads.create();
    const values = (await alice.runs.wait(thread.thread_id, "whoami", {
      input: { messages: [human("who am i")] },
      config: { configurable: { langgraph_auth_user_id: "mallory", langgraph_auth_permissions: ["admin"] } },
    })) as { messages: { content: string }[] };
    const seen = JSON.parse(values.messages.at(-1)!.content) as { user: Record<string, unknown>; user_id: string; permissions: string[] };
    t.equal(seen.user_id, "alice");
    t.same(seen.permissions, ALL_SCOPES);
    t.match(seen.user, { identity: "alice", display_name: "alice", is_authenticated: true, permissions: ALL_SCOPES });
    t.match(seen.user.url_seen, new RegExp(`^http://127\\.0\\.0\\.1:\\d+/threads/${thread.thread_id}/runs/wait$`), "authenticate got the request's URL");
  });
});

t.test("LANGGRAPH_API_KEY and custom auth combined: the key is checked first, then the token", async (t) => {
  const srv = await startTestServer({ env: { LANGGRAPH_JSON: AUTH_PROJECT, LANGGRAPH_API_KEY: "k-123" } });
  t.teardown(() => srv.close());
  const token = await signToken("alice", ALL_SCOPES);
  const post = (headers: Record<string, string>) =>
    fetch(`${srv.url}/threads`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: "{}" });
  const noKey = await post({ authorization: `Bearer ${token}` });
  t.same([noKey.status, await noKey.json()], [401, { detail: "Missing or invalid API key (x-api-key header)" }]);
  const noToken = await post({ "x-api-key": "k-123" });
  t.same([noToken.status, await noToken.json()], [401, { detail: "Missing bearer token" }]);
  const both = await post({ "x-api-key": "k-123", authorization: `Bearer ${token}` });
  t.equal(both.status, 200);
  t.equal(((await both.json()) as { metadata: { owner: string } }).metadata.owner, "alice");
  t.equal((await fetch(`${srv.url}/ok`)).status, 200, "public routes stay public");
});
