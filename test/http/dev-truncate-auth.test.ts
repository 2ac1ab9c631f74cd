import t from "tap";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@langchain/langgraph-sdk";
import { startTestServer } from "../support/server.js";
import { signToken } from "../auth/jwt.js";

/**
 * POST /internal/truncate (LANGGRAPH_DEV=true) empties every tenant's data: under custom auth no
 * user may call it (403 naming why; no token is the handler's 401), whatever scopes they hold;
 * in API-key mode it needs the key, as every route does.
 */

const AUTH_PROJECT = path.join(path.join(path.dirname(fileURLToPath(import.meta.url)), ".."), "auth", "langgraph.json");
const ALL_SCOPES = ["threads:read", "threads:write", "assistants:read", "assistants:write"];
const EVERYTHING = { runs: true, threads: true, assistants: true, checkpointer: true, store: true };

function truncate(url: string, headers: Record<string, string> = {}) {
  return fetch(`${url}/internal/truncate`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(EVERYTHING) });
}

t.test("development mode with custom auth: truncate is refused for every user", async (t) => {
  const srv = await startTestServer({ env: { LANGGRAPH_JSON: AUTH_PROJECT, LANGGRAPH_DEV: "true" } });
  t.teardown(() => srv.close());
  const aliceToken = await signToken("alice", ALL_SCOPES);
  const alice = new Client({ apiUrl: srv.url, defaultHeaders: { authorization: `Bearer ${aliceToken}` } });
  const thread = await alice.threads.create({ metadata: { topic: "keep me" } });

  const none = await truncate(srv.url);
  t.equal(none.status, 401, "no token: the auth handler's answer");
  t.same(await none.json(), { detail: "Missing bearer token" });

  for (const [user, scopes] of [
    ["bob", ALL_SCOPES],
    ["alice", ALL_SCOPES],
    ["carol", []],
  ] as const) {
    const res = await truncate(srv.url, { authorization: `Bearer ${await signToken(user, [...scopes])}` });
    t.equal(res.status, 403, `${user} is refused`);
    const { detail } = (await res.json()) as { detail: string };
    t.match(detail, /custom auth/, "the detail says why");
    t.match(detail, /every user's/);
  }
  t.equal((await alice.threads.get(thread.thread_id)).metadata?.topic, "keep me", "alice's thread is still there");
});

t.test("development mode with an API key: truncate needs the key", async (t) => {
  const apiKey = "dev-key";
  const srv = await startTestServer({ env: { LANGGRAPH_DEV: "true", LANGGRAPH_API_KEY: apiKey } });
  t.teardown(() => srv.close());
  const thread = await srv.client.threads.create();

  const keyless = await truncate(srv.url);
  t.equal(keyless.status, 401);
  t.match(await keyless.json(), { detail: /API key/ });
  t.equal((await truncate(srv.url, { "x-api-key": "wrong" })).status, 401);
  t.ok(await srv.client.threads.get(thread.thread_id), "nothing deleted without the key");

  const keyed = await truncate(srv.url, { "x-api-key": apiKey });
  t.equal(keyed.status, 200);
  t.same(await keyed.json(), { ok: true });
  t.same(await srv.client.threads.search(), [], "with the key it empties the server");
});

t.test("outside development mode there is no such route, auth or not", async (t) => {
  const srv = await startTestServer({ env: { LANGGRAPH_JSON: AUTH_PROJECT } });
  t.teardown(() => srv.close());
  const res = await truncate(srv.url, { authorization: `Bearer ${await signToken("alice", ALL_SCOPES)}` });
  t.equal(res.status, 404);
});
