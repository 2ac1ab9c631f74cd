import path from "node:path";
import { randomUUID } from "node:crypto";
import t, { type Test } from "tap";
import { Client } from "@langchain/langgraph-sdk";
import { repoRoot, startTestServer, type TestServer } from "../support/server.js";
import { signToken } from "../auth/jwt.js";
import { TRANSPORTS, record, resumeSince, rootLifecycle, threadStream, upgrade, type ProtocolEvent } from "../support/protocol-stream.js";

/**
 * The thread streaming protocol's three routes (POST /threads/{id}/commands, POST
 * /threads/{id}/stream/events (SSE), GET /threads/{id}/stream/events (WebSocket)) behind the
 * server's two gates:
 * - LANGGRAPH_API_KEY: without the key (or with another) every route answers 401, the WebSocket
 *   upgrade included (an HTTP 401 instead of the 101, and the connection closed by the server); with
 *   it (`x-api-key`) the official SDK streams over both transports.
 * - custom auth (test/auth: JWT, every user owns what they create and sees only that): another
 *   user's thread is not found on /commands (protocol errors), on SSE (404, as REST answers) and on
 *   the WebSocket (closed with 4404); a missing scope is 403 / 4403; no token is 401 everywhere; the
 *   owner's thread works through the SDK on both transports.
 */

const KEY = "protocol-auth-test-key";
const AUTH_PROJECT = path.join(repoRoot, "test", "auth", "langgraph.json");
const ALL_SCOPES = ["threads:read", "threads:write", "assistants:read", "assistants:write"];
const wsUrl = (srv: TestServer, threadId: string) => `${srv.url.replace(/^http/, "ws")}/threads/${threadId}/stream/events`;
const texts = (e: ProtocolEvent) => e.params.data.messages.map((m) => m.content);
const kinds = (events: ProtocolEvent[]) => events.map((e) => (e.method === "lifecycle" ? e.params.data.event : e.method));

/** A POST with a JSON body and these headers: the status, the content type and the parsed body. */
async function post(url: string, headers: Record<string, string>, body: unknown) {
  const controller = new AbortController();
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
    signal: controller.signal,
  });
  const type = res.headers.get("content-type") ?? "";
  // An event stream is not read to its end (it would follow the thread): the answer is its status.
  const json = type.startsWith("application/json") ? ((await res.json()) as Record<string, unknown>) : undefined;
  controller.abort();
  return { status: res.status, type, json, wwwAuthenticate: res.headers.get("www-authenticate") };
}

const command = (srv: TestServer, threadId: string, headers: Record<string, string>, body: unknown) =>
  post(`${srv.url}/threads/${threadId}/commands`, headers, body);
const events = (srv: TestServer, threadId: string, headers: Record<string, string>) =>
  post(`${srv.url}/threads/${threadId}/stream/events`, headers, { channels: ["lifecycle", "values"], since: 0 });

/** A WebSocket upgrade that must be refused with an HTTP `status` (no socket), whose connection the server then closes. */
async function expectRefusedUpgrade(t: Test, url: string, headers: Record<string, string>, status: number, detail: string, name: string) {
  const outcome = await upgrade(url, headers);
  if (outcome.kind !== "refused") return t.fail(`${name}: the upgrade was refused, not ${JSON.stringify(outcome)}`);
  t.equal(outcome.status, status, `${name}: the upgrade is answered ${status}, not 101`);
  t.same(JSON.parse(outcome.body), { detail }, `${name}: with the detail REST gives`);
  t.ok(await outcome.closedByServer(5_000), `${name}: the server closes the refused connection (it no longer belongs to the HTTP server)`);
}

t.test("LANGGRAPH_API_KEY on the protocol routes", async (t) => {
  const srv = await startTestServer({ env: { LANGGRAPH_API_KEY: KEY } });
  t.teardown(() => srv.close());
  const refusal = "Missing or invalid API key (x-api-key header)";

  t.test("without the key, or with another: 401 on POST /commands, POST /stream/events and the WebSocket upgrade", async (t) => {
    const threadId = randomUUID();
    for (const [name, headers] of [
      ["no key", {}],
      ["another key", { "x-api-key": "not-the-key" }],
      ["the key as a bearer token", { authorization: `Bearer ${KEY}` }],
    ] as [string, Record<string, string>][]) {
      const cmd = await command(srv, threadId, headers, { id: 1, method: "run.start", params: { assistant_id: "agent", input: {} } });
      t.same([cmd.status, cmd.json], [401, { detail: refusal }], `${name}: POST /commands`);
      const sse = await events(srv, threadId, headers);
      t.same([sse.status, sse.json], [401, { detail: refusal }], `${name}: POST /stream/events, before any event stream`);
      await expectRefusedUpgrade(t, wsUrl(srv, threadId), headers, 401, refusal, `${name}: WebSocket`);
    }
    t.equal((await fetch(`${srv.url}/threads/${threadId}`, { headers: { "x-api-key": KEY } })).status, 404, "nothing made the thread");

    // The SDK without the key: its commands are refused over SSE; its WebSocket never opens.
    const anonymous = new Client({ apiUrl: srv.url, apiKey: null });
    const sse = threadStream(anonymous, srv.url, "agent", "sse");
    t.teardown(() => sse.close());
    await t.rejects(sse.run.start({ input: { messages: [{ type: "human", content: "hi" }] } }), /401/, "SDK over SSE: run.start refused");
    const ws = threadStream(anonymous, srv.url, "agent", "websocket");
    t.teardown(() => ws.close());
    await t.rejects(
      ws.run.start({ input: { messages: [{ type: "human", content: "hi" }] } }),
      /Failed to open protocol WebSocket/,
      "SDK over a WebSocket: no socket",
    );
  });

  t.test("with the key (x-api-key): the SDK streams over SSE and over a WebSocket", async (t) => {
    const client = new Client({ apiUrl: srv.url, apiKey: KEY });
    const threadId = randomUUID();
    let seen: ProtocolEvent[] = [];
    for (const transport of TRANSPORTS) {
      // Over a WebSocket the key goes in the upgrade's headers (the SDK's WebSocket transport sends no client headers).
      const thread = threadStream(client, srv.url, "agent", transport, { threadId, headers: transport === "websocket" ? { "x-api-key": KEY } : undefined });
      t.teardown(() => thread.close());
      const { events, wait } = record(thread);
      await thread.run.start({ input: { messages: [{ type: "human", content: transport }] } });
      const values = (await thread.values) as { messages: { content: string }[] } | undefined;
      t.same(values?.messages.map((m) => m.content).slice(-2), [transport, `You said: ${transport}`], `${transport}: the run's values`);
      await wait((e) => rootLifecycle(e, "completed"));
      t.same(
        events.filter((e) => e.method === "lifecycle").map((e) => e.params.data.event),
        ["running", "completed"],
        `${transport}: lifecycle`,
      );
      const state = (await thread.state.get({ namespace: [] } as never)) as { values: { messages: unknown[] } };
      t.equal(state.values.messages.length, transport === "sse" ? 2 : 4, `${transport}: state.get`);
      seen = [...seen, ...events];
    }
    // A resume with since, with the key, on both transports: the second run as it was streamed.
    const firstEnd = seen.find((e) => rootLifecycle([e], "completed"))!;
    for (const transport of TRANSPORTS) {
      const got = await resumeSince(
        client,
        srv.url,
        transport,
        threadId,
        { channels: ["lifecycle", "values"], since: firstEnd.seq },
        (s) => rootLifecycle(s, "completed"),
        {
          headers: { "x-api-key": KEY },
        },
      );
      t.same(kinds(got), ["running", "values", "values", "completed"], `${transport}: since`);
      t.same(
        got.map((e) => e.seq),
        seen.filter((e) => e.seq > firstEnd.seq && ["lifecycle", "values"].includes(e.method)).map((e) => e.seq),
        `${transport}: the seqs the second run was streamed with`,
      );
      t.same(texts(got[2]!), ["sse", "You said: sse", "websocket", "You said: websocket"]);
    }
  });
});

t.test("custom auth on the protocol routes", async (t) => {
  const srv = await startTestServer({ env: { LANGGRAPH_JSON: AUTH_PROJECT } });
  t.teardown(() => srv.close());
  const aliceHeaders = { authorization: `Bearer ${await signToken("alice", ALL_SCOPES)}` };
  const bobHeaders = { authorization: `Bearer ${await signToken("bob", ALL_SCOPES)}` };
  const carolHeaders = { authorization: `Bearer ${await signToken("carol", ["threads:write", "assistants:read"])}` };
  const alice = new Client({ apiUrl: srv.url, defaultHeaders: aliceHeaders });
  const bob = new Client({ apiUrl: srv.url, defaultHeaders: bobHeaders });

  // Alice's thread, made by her first run.start (as the SDK does: the thread is created on first use).
  const mine = threadStream(alice, srv.url, "agent", "sse");
  t.teardown(() => mine.close());
  const { events: aliceEvents, wait } = record(mine);
  await mine.run.start({ input: { messages: [{ type: "human", content: "mine" }] } });
  await wait((e) => rootLifecycle(e, "completed"));
  const threadId = mine.threadId;
  t.match(await alice.threads.get(threadId), { metadata: { owner: "alice" } }, "the thread is alice's");
  const notFound = `Thread with ID ${threadId} not found`;
  const rest = await fetch(`${srv.url}/threads/${threadId}`, { headers: bobHeaders });
  t.same([rest.status, await rest.json()], [404, { detail: notFound }], "REST: bob does not see it");

  t.test("another user's thread: not found on /commands, SSE and the WebSocket", async (t) => {
    const runsBefore = (await alice.runs.list(threadId)).length;
    for (const [id, method, params] of [
      [1, "run.start", { assistant_id: "agent", input: { messages: [{ type: "human", content: "theirs" }] } }],
      [2, "state.get", { namespace: [] }],
      [3, "agent.getTree", {}],
      [4, "input.respond", { interrupt_id: "x", response: "yes" }],
    ] as [number, string, Record<string, unknown>][]) {
      const answer = await command(srv, threadId, bobHeaders, { id, method, params });
      t.equal(answer.status, 200, `${method}: a protocol answer`);
      t.same(answer.json, { type: "error", id, error: "invalid_argument", message: notFound }, `${method}: the thread is not found, as REST says`);
    }
    t.equal((await alice.runs.list(threadId)).length, runsBefore, "bob's run.start made no run");

    const sse = await events(srv, threadId, bobHeaders);
    t.same([sse.status, sse.json], [404, { detail: notFound }], "SSE: 404 before any event stream, as REST");
    t.match(sse.type, /^application\/json/);

    const ws = await upgrade(wsUrl(srv, threadId), bobHeaders, [{ id: 1, method: "subscription.subscribe", params: { channels: ["values"] } }]);
    t.same(ws, { kind: "closed", code: 4404, reason: notFound, frames: [] }, "WebSocket: closed with 4404 before any frame");

    // Through the SDK: bob's commands are refused on both transports, and he sees none of alice's events.
    // Over SSE run.start's answer is the protocol error; over a WebSocket the socket the SDK opens is closed
    // with 4404, which the SDK reports as a stream failure with status 404 (and does not reconnect).
    for (const transport of TRANSPORTS) {
      const theirs = threadStream(bob, srv.url, "agent", transport, { threadId, headers: transport === "websocket" ? bobHeaders : undefined });
      t.teardown(() => theirs.close());
      const { events: bobEvents } = record(theirs);
      const failure = new Promise<unknown>((resolve, reject) => {
        theirs.onError(resolve);
        setTimeout(() => reject(new Error("no stream failure reported")), 10_000).unref();
      });
      await t.rejects(theirs.run.start({ input: { messages: [{ type: "human", content: "theirs" }] } }), `SDK ${transport}: run.start refused`);
      if (transport === "sse") {
        await t.rejects(theirs.run.start({ input: {} }), { message: notFound }, "SDK sse: with the thread not found");
      } else {
        t.match(
          await failure,
          { status: 404, message: `Protocol WebSocket closed by the server: 4404 ${notFound}` },
          "SDK websocket: the stream fails with 404",
        );
      }
      t.same(bobEvents, [], `SDK ${transport}: no event of alice's thread`);
    }
    t.equal((await alice.runs.list(threadId)).length, runsBefore, "still no run of bob's");
  });

  t.test("no token: 401 everywhere, the WebSocket upgrade included; a missing scope: 403 / 4403", async (t) => {
    const cmd = await command(srv, threadId, {}, { id: 1, method: "state.get", params: {} });
    t.same([cmd.status, cmd.json, cmd.wwwAuthenticate], [401, { detail: "Missing bearer token" }, "Bearer"], "POST /commands");
    const sse = await events(srv, threadId, {});
    t.same([sse.status, sse.json], [401, { detail: "Missing bearer token" }], "POST /stream/events");
    await expectRefusedUpgrade(t, wsUrl(srv, threadId), {}, 401, "Missing bearer token", "WebSocket without a token");
    await expectRefusedUpgrade(t, wsUrl(srv, threadId), { authorization: "Bearer abc.def.ghi" }, 401, "Invalid token", "WebSocket with a bad token");

    const noRead = await command(srv, threadId, carolHeaders, { id: 2, method: "state.get", params: {} });
    t.same(noRead.json, { type: "error", id: 2, error: "permission_denied", message: "Missing scope threads:read" }, "POST /commands: permission_denied");
    const sseNoRead = await events(srv, threadId, carolHeaders);
    t.same([sseNoRead.status, sseNoRead.json], [403, { detail: "Missing scope threads:read" }], "SSE: 403");
    const wsNoRead = await upgrade(wsUrl(srv, threadId), carolHeaders);
    t.same(wsNoRead, { kind: "closed", code: 4403, reason: "Missing scope threads:read", frames: [] }, "WebSocket: 4403");
  });

  t.test("the owner's thread works through the SDK on both transports", async (t) => {
    t.same(texts(aliceEvents.filter((e) => e.method === "values").at(-1)!), ["mine", "You said: mine"], "SSE: the first run's values");
    const state = (await mine.state.get({ namespace: [] } as never)) as { values: { messages: unknown[] } };
    t.equal(state.values.messages.length, 2, "state.get over /commands");

    const socket = threadStream(alice, srv.url, "agent", "websocket", { threadId, headers: aliceHeaders });
    t.teardown(() => socket.close());
    const { events, wait } = record(socket);
    await socket.run.start({ input: { messages: [{ type: "human", content: "again" }] } });
    await wait((e) => rootLifecycle(e, "completed"));
    t.same(texts(events.filter((e) => e.method === "values").at(-1)!), ["mine", "You said: mine", "again", "You said: again"], "WebSocket: a second run");
    t.match(await socket.agent.getTree(), { tree: { status: "completed", graph_name: "agent" } });

    const firstEnd = aliceEvents.find((e) => rootLifecycle([e], "completed"))!;
    for (const transport of TRANSPORTS) {
      const got = await resumeSince(
        alice,
        srv.url,
        transport,
        threadId,
        { channels: ["lifecycle"], since: firstEnd.seq },
        (s) => rootLifecycle(s, "completed"),
        {
          headers: aliceHeaders,
        },
      );
      t.same(kinds(got), ["running", "completed"], `${transport}: since, with her token`);
    }
    t.equal((await alice.runs.list(threadId)).length, 2, "her two runs");
  });
});

t.test("an upgrade to a path that is no WebSocket is answered over HTTP, and its connection closed", async (t) => {
  const srv = await startTestServer();
  t.teardown(() => srv.close());
  const ws = srv.url.replace(/^http/, "ws");
  for (const [path, status] of [
    ["/ok", 200],
    ["/no/such/route", 404],
    ["/threads/0190f1c2-0000-7000-8000-0000000000ff", 404],
  ] as const) {
    const outcome = await upgrade(`${ws}${path}`);
    if (outcome.kind !== "refused") {
      t.fail(`${path}: answered over HTTP, not ${JSON.stringify(outcome)}`);
      continue;
    }
    t.equal(outcome.status, status, `${path}: ${status}`);
    t.ok(await outcome.closedByServer(5_000), `${path}: the server closes the connection`);
  }
});
