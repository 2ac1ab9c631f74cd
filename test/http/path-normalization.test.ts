import t, { type Test } from "tap";
import { copyFile, mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { repoRoot, startTestServer, type TestServer } from "../support/server.js";
import { rawRequest, sendRaw, type RawAnswer } from "../support/raw-http.js";
import { signToken } from "../auth/jwt.js";
import { checkRequestTarget } from "../../src/http/request-target.js";

/**
 * Every reader of a request's path (fastify's router, the public-path check, the API key, custom
 * auth, the custom app given `new Request(url)`) sees the one path the request-target check hands
 * on; a target two of them could read differently (dot segments, encoded separators, a
 * backslash, a fragment, absolute-form, a Host that moves the path) is refused with a 400. Sent
 * over raw sockets: fetch would resolve `..` before sending.
 */

const graphsDir = path.join(repoRoot, "test", "graphs");
const SECRET_APP = path.join(graphsDir, "secret-app.ts");
const SECRET = "the custom route's data";

/** A langgraph.json in a temp dir, with a generative UI component there (UI files must be inside the project). */
async function configFile(t: Test, json: Record<string, unknown>): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "agent-server-paths-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  for (const name of ["weather.jsx", "weather.css"]) await copyFile(path.join(graphsDir, "parity", "ui", name), path.join(dir, name));
  const file = path.join(dir, "langgraph.json");
  await writeFile(file, JSON.stringify(json));
  return file;
}

const config = (extra: Record<string, unknown> = {}, http: Record<string, unknown> = {}) => ({
  graphs: { agent: path.join(graphsDir, "agent.ts") + ":graph" },
  http: { app: `${SECRET_APP}:app`, ...http },
  ...extra,
});

async function start(t: Test, json: Record<string, unknown>, env: Record<string, string> = {}): Promise<TestServer> {
  const srv = await startTestServer({ env: { LANGGRAPH_JSON: await configFile(t, json), ...env } });
  t.teardown(() => srv.close());
  return srv;
}

/** Spellings of a public path that lead, once something resolves them, to a custom route. */
const TRAVERSALS: [method: string, target: string][] = [
  ["GET", "/docs/../custom/secret"],
  ["GET", "/docs/%2e%2e/custom/secret"],
  ["GET", "/docs/%2E%2E/custom/secret"],
  ["GET", "/docs/.%2e/custom/secret"],
  ["GET", "/docs/%2e./custom/secret"],
  ["GET", "/docs/./../custom/secret"],
  ["GET", "/docs/x/../../custom/secret"],
  ["GET", "/%64ocs/%2E%2e/custom/secret"],
  ["GET", "/docs\\..\\custom\\secret"],
  ["GET", "/docs/..\\custom/secret"],
  ["GET", "/docs/..%2fcustom/secret"],
  ["GET", "/docs/x%2F..%2F..%2Fcustom/secret"],
  ["GET", "/docs/x%5c..%5c..%5ccustom%5csecret"],
  ["GET", "/docs/#/../../custom/secret"],
  ["GET", "/ok/../custom/secret"],
  ["GET", "/ok/./../custom/secret"],
  ["GET", "/ui/a/../../custom/secret"],
  ["GET", "/.well-known/../custom/secret"],
  ["GET", "/a2a/x/.well-known/../../../custom/secret"],
  ["GET", "/openapi.json/../custom/secret"],
  ["GET", "http://127.0.0.1/custom/secret"],
  ["GET", "http://127.0.0.1/docs/../custom/secret"],
  ["GET", "*"],
  ["POST", "/docs/../custom/echo"],
  ["POST", "/docs/%2e%2e/custom/echo"],
];

async function send(srv: TestServer, method: string, target: string, headers: Record<string, string> = {}): Promise<RawAnswer> {
  const answer = await sendRaw(srv.url, rawRequest(method, target, headers, method === "POST" ? "hello" : undefined));
  if (!answer) throw new Error(`${method} ${target}: the connection closed without an answer`);
  return answer;
}

/** Each traversal: 400 with a `{"detail"}`, and never the custom route's data. */
async function expectRefused(t: Test, srv: TestServer, headers: Record<string, string> = {}): Promise<void> {
  for (const [method, target] of TRAVERSALS) {
    const answer = await send(srv, method, target, headers);
    t.equal(answer.status, 400, `${method} ${target} → 400`);
    t.match(JSON.parse(answer.body), { detail: String }, `${method} ${target}: a detail`);
    t.notOk(answer.body.includes(SECRET) || answer.body.includes("echoed"), `${method} ${target}: no custom route answered`);
  }
}

t.test("the target check itself", async (t) => {
  t.same(checkRequestTarget("/threads/abc?x=/../y"), { path: "/threads/abc", url: "/threads/abc?x=/../y" }, "a query string is not the path");
  t.same(checkRequestTarget("/%6Fk"), { path: "/ok", url: "/ok" }, "encoded unreserved characters are decoded, as the router decodes them");
  t.same(checkRequestTarget("/store/a%20b;c=d"), { path: "/store/a%20b;c=d", url: "/store/a%20b;c=d" }, "other encodings and ; stay as they are");
  t.same(checkRequestTarget("//ok/"), { path: "//ok/", url: "//ok/" }, "duplicate and trailing slashes stay (the router keeps them too)");
  t.same(checkRequestTarget("/ui/agent/entrypoint.js"), { path: "/ui/agent/entrypoint.js", url: "/ui/agent/entrypoint.js" });
  for (const bad of [
    "/a/..",
    "/a/.",
    "/%2e",
    "/a/%2E%2e/b",
    "/a%2Fb",
    "/a%5Cb",
    "/a\\b",
    "/a#b",
    "/a%zz",
    "/a%",
    "/%FF",
    "/a\u00e9",
    '/a"b',
    "/a{b}",
    "http://h/a",
    "*",
    "",
  ]) {
    t.ok("refused" in checkRequestTarget(bad), `${JSON.stringify(bad)} is refused`);
  }
  for (const host of ["localhost:2024", "127.0.0.1", "[::1]:8080", "my_service.internal:80", "EXAMPLE.com."]) {
    t.notOk("refused" in checkRequestTarget("/ok", host), `Host ${host} is fine`);
  }
  for (const host of ["x/custom/secret?", "x#", "a@b", "x y", "x\\y", "127y0.0.1", "x:99999", "[::1"]) {
    t.ok("refused" in checkRequestTarget("/ok", host), `Host ${host} is refused`);
  }
});

t.test("no auth: traversals are refused, the custom app sees the path the router saw", async (t) => {
  const srv = await start(t, config());
  await expectRefused(t, srv);
  const secret = await send(srv, "GET", "/custom/secret");
  t.same([secret.status, JSON.parse(secret.body)], [200, { secret: SECRET, path: "/custom/secret" }], "the route itself answers");
  const note = await send(srv, "GET", "/docs/custom-note");
  t.same(JSON.parse(note.body), { note: "public", path: "/docs/custom-note" });
  const query = await send(srv, "GET", "/docs/custom-note?next=/../custom/secret");
  t.same(JSON.parse(query.body), { note: "public", path: "/docs/custom-note" }, "a query string's /.. moves nothing");
});

t.test("API key mode: traversals without x-api-key are refused; public paths and routes work", async (t) => {
  const apiKey = "path-test-key";
  const srv = await start(t, config({ ui: { "agent-alias": "./weather.jsx" } }), { LANGGRAPH_API_KEY: apiKey });
  await expectRefused(t, srv);
  const key = { "x-api-key": apiKey };

  t.equal((await send(srv, "GET", "/custom/secret")).status, 401, "the custom route needs the key");
  t.equal((await send(srv, "POST", "/custom/echo")).status, 401);
  t.same(JSON.parse((await send(srv, "GET", "/custom/secret", key)).body), { secret: SECRET, path: "/custom/secret" }, "with the key it answers");
  t.same(JSON.parse((await send(srv, "POST", "/custom/echo", key)).body), { echoed: "hello", path: "/custom/echo" });

  // Spellings that are no traversal: each reader sees the same path, which is not public.
  for (const target of ["//custom/secret", "/custom/secret/", "/custom/secret;x", "/custom//secret", "/%63ustom/secret"]) {
    const answer = await send(srv, "GET", target);
    t.equal(answer.status, 401, `${target} → 401`);
    t.notOk(answer.body.includes(SECRET), `${target}: no secret`);
  }
  const preflight = await send(srv, "OPTIONS", "/custom/secret", { origin: "http://example.com", "access-control-request-method": "GET" });
  t.equal(preflight.status, 204, "a preflight is answered by CORS");
  t.notOk(preflight.body.includes(SECRET));

  // A Host that would move the path the custom app is given.
  for (const host of ["x/custom/secret?", "x/custom/secret#", "x\\custom", "a@b", "x y"]) {
    const answer = await send(srv, "GET", "/docs", { host });
    t.equal(answer.status, 400, `Host: ${host} → 400`);
    t.notOk(answer.body.includes(SECRET));
  }
  const twoHosts = await sendRaw(srv.url, "GET /docs HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  t.equal(twoHosts?.status, 400, "two Host headers → 400");

  // Legitimate paths, without the key (public) and with it.
  for (const target of [
    "/ok",
    "/%6Fk",
    "/info",
    "/docs",
    "/docs/",
    "/openapi.json",
    "/.well-known/agent-card.json",
    "/.well-known/agent-card.json?assistant_id=agent",
    "/ui/agent-alias/entrypoint.js",
    "/metrics",
  ]) {
    t.equal((await send(srv, "GET", target)).status, 200, `${target} is public`);
  }
  for (const host of ["localhost:2024", "127.0.0.1", "[::1]:8080", "my_service.internal:80", "EXAMPLE.com."]) {
    t.equal((await send(srv, "GET", "/ok", { host })).status, 200, `Host: ${host} is fine`);
  }
  const created = await fetch(`${srv.url}/threads`, { method: "POST", headers: { ...key, "content-type": "application/json" }, body: "{}" });
  const { thread_id } = (await created.json()) as { thread_id: string };
  const thread = await send(srv, "GET", `/threads/${thread_id}`, key);
  t.equal(thread.status, 200, "/threads/{id} with the key");
  t.equal(JSON.parse(thread.body).thread_id, thread_id);
  t.equal((await send(srv, "GET", `/threads/${thread_id}`)).status, 401, "/threads/{id} without it");
  const card = await send(srv, "GET", `/a2a/agent/.well-known/agent-card.json`);
  t.not(card.status, 401, "an assistant's agent card path is public");
  t.not(card.status, 400);
  t.equal((await send(srv, "GET", "/threads/a%2Fb", key)).status, 400, "an encoded slash in an id is refused");
});

t.test("custom auth: traversals without a token are refused; the handler's answer otherwise", async (t) => {
  const srv = await start(t, config({ auth: { path: path.join(repoRoot, "test", "auth", "jwt-auth.ts") + ":auth" } }));
  await expectRefused(t, srv);
  const none = await send(srv, "GET", "/custom/secret");
  t.same([none.status, JSON.parse(none.body)], [401, { detail: "Missing bearer token" }], "the custom route needs a token");
  t.equal((await send(srv, "GET", "/%63ustom/secret")).status, 401);
  const token = { authorization: `Bearer ${await signToken("alice", ["threads:read"])}` };
  t.same(JSON.parse((await send(srv, "GET", "/custom/secret", token)).body), { secret: SECRET, path: "/custom/secret" });
  t.equal((await send(srv, "GET", "/docs/../custom/secret", token)).status, 400, "refused with a token too: the target is the problem");
  t.equal((await send(srv, "GET", "/ok")).status, 200);
  t.equal((await send(srv, "GET", "/docs/")).status, 200);
});

t.test("a plain fetch app under a mount prefix, API key mode", async (t) => {
  const apiKey = "prefix-key";
  const srv = await start(t, config({}, { app: `${SECRET_APP}:plain`, mount_prefix: "/my-api" }), { LANGGRAPH_API_KEY: apiKey });
  for (const target of [
    "/my-api/docs/../custom/secret",
    "/my-api/docs/%2e%2e/custom/secret",
    "/my-api/../my-api/custom/secret",
    "/other/../my-api/custom/secret",
    "/my-api/ok/..%2F..%2Fcustom/secret",
  ]) {
    const answer = await send(srv, "GET", target);
    t.equal(answer.status, 400, `${target} → 400`);
    t.notOk(answer.body.includes(SECRET));
  }
  t.equal((await send(srv, "GET", "/my-api/custom/secret")).status, 401);
  t.same(
    JSON.parse((await send(srv, "GET", "/my-api/custom/secret", { "x-api-key": apiKey })).body),
    { secret: SECRET, path: "/custom/secret" },
    "the app is given the path under the prefix",
  );
  t.same(JSON.parse((await send(srv, "POST", "/my-api/custom/echo", { "x-api-key": apiKey })).body), { echoed: "hello", path: "/custom/echo" });
  t.equal((await send(srv, "GET", "/my-api/ok")).status, 200);
  t.equal((await send(srv, "GET", "/my-api/docs")).status, 200);
  t.equal((await send(srv, "GET", "/ok")).status, 401, "outside the prefix: not public (and no route)");
  const outside = await send(srv, "GET", "/ok", { "x-api-key": apiKey });
  t.same([outside.status, JSON.parse(outside.body)], [404, { detail: "Not Found: GET /ok" }]);
  t.equal((await send(srv, "GET", "/my-api//ok")).status, 401, "a duplicate slash is not /ok");
});
