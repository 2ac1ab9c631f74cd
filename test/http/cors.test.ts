import t, { type Test } from "tap";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { startTestServer, TEST_GRAPHS } from "../support/server.js";
import { corsOptions } from "../../src/http/cors.js";

/** CORS on the wire: the default policy, preflights before authentication, errors readable, `http.cors`. */

const AUTH_PROJECT = path.join(path.join(path.dirname(fileURLToPath(import.meta.url)), ".."), "auth", "langgraph.json");
const ORIGIN = "http://127.0.0.1:5173";
const AGENT = `${path.join(path.dirname(TEST_GRAPHS), "agent.ts")}:graph`;

const preflight = (url: string, origin = ORIGIN, headers = "content-type,authorization,x-api-key,last-event-id") =>
  fetch(url, { method: "OPTIONS", headers: { origin, "access-control-request-method": "POST", "access-control-request-headers": headers } });

async function withCors(t: Test, cors: Record<string, unknown>) {
  const dir = await mkdtemp(path.join(os.tmpdir(), "agent-server-cors-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await writeFile(path.join(dir, "langgraph.json"), JSON.stringify({ graphs: { agent: AGENT }, http: { cors } }));
  const srv = await startTestServer({ env: { LANGGRAPH_JSON: path.join(dir, "langgraph.json") } });
  t.teardown(() => srv.close());
  return srv;
}

t.test("default policy: like the official server", async (t) => {
  const srv = await startTestServer();
  t.teardown(() => srv.close());
  const pre = await preflight(`${srv.url}/threads`);
  t.equal(pre.status, 204, "preflight answered (it was a 404 before)");
  t.equal(pre.headers.get("access-control-allow-origin"), "*");
  t.match(pre.headers.get("access-control-allow-methods"), /GET.*POST.*PUT.*PATCH.*DELETE/);
  t.equal(pre.headers.get("access-control-allow-headers"), "content-type,authorization,x-api-key,last-event-id", "the headers clients send are allowed");
  const created = await fetch(`${srv.url}/threads`, { method: "POST", headers: { origin: ORIGIN, "content-type": "application/json" }, body: "{}" });
  t.equal(created.headers.get("access-control-allow-origin"), "*");
  const exposed = created.headers.get("access-control-expose-headers")?.split(/,\s*/) ?? [];
  t.same(exposed, ["Content-Location", "Location", "X-Pagination-Total", "X-Pagination-Next", "X-Request-Id", "X-Log-Position"]);
  for (const [method, url, body, status] of [
    ["GET", "/threads/00000000-0000-4000-8000-000000000000", undefined, 404],
    ["POST", "/threads/search", { limit: 0 }, 422],
    ["GET", "/nowhere", undefined, 404],
  ] as const) {
    const res = await fetch(`${srv.url}${url}`, {
      method,
      headers: { origin: ORIGIN, ...(body ? { "content-type": "application/json" } : {}) },
      body: body && JSON.stringify(body),
    });
    t.equal(res.status, status, `${method} ${url}`);
    t.equal(res.headers.get("access-control-allow-origin"), "*", `${status} carries CORS headers`);
  }
});

t.test("with custom auth and an API key: preflights pass without credentials, 401 and 403 are readable", async (t) => {
  const srv = await startTestServer({ env: { LANGGRAPH_JSON: AUTH_PROJECT, LANGGRAPH_API_KEY: "k" } });
  t.teardown(() => srv.close());
  const pre = await preflight(`${srv.url}/threads`);
  t.equal(pre.status, 204, "answered before the API key and authentication");
  t.equal(pre.headers.get("access-control-allow-origin"), "*");
  const noKey = await fetch(`${srv.url}/threads`, { method: "POST", headers: { origin: ORIGIN } });
  t.equal(noKey.status, 401);
  t.equal(noKey.headers.get("access-control-allow-origin"), "*", "401 of the API key carries CORS headers");
  const noToken = await fetch(`${srv.url}/threads`, { method: "POST", headers: { origin: ORIGIN, "x-api-key": "k" } });
  t.equal(noToken.status, 401);
  t.equal(noToken.headers.get("access-control-allow-origin"), "*", "401 of authentication carries CORS headers");
  t.same(await noToken.json(), { detail: "Missing bearer token" });
});

t.test("http.cors replaces the default", async (t) => {
  t.test("allow_origins: listed origins are echoed, others get no CORS headers", async (t) => {
    const srv = await withCors(t, { allow_origins: ["https://app.example.com"], allow_headers: ["content-type"], max_age: 600 });
    const ok = await preflight(`${srv.url}/threads`, "https://app.example.com", "content-type");
    t.equal(ok.headers.get("access-control-allow-origin"), "https://app.example.com");
    t.equal(ok.headers.get("access-control-allow-headers"), "content-type");
    t.equal(ok.headers.get("access-control-max-age"), "600");
    t.match(ok.headers.get("vary"), /Origin/i);
    const other = await preflight(`${srv.url}/threads`, ORIGIN);
    t.equal(other.headers.get("access-control-allow-origin"), null, "an unlisted origin is not allowed");
    const get = await fetch(`${srv.url}/ok`, { headers: { origin: ORIGIN } });
    t.equal(get.headers.get("access-control-allow-origin"), null);
  });

  t.test("allow_origin_regex, credentials and expose_headers", async (t) => {
    const srv = await withCors(t, {
      allow_origin_regex: "^https://[a-z]+\\.example\\.org$",
      allow_credentials: true,
      expose_headers: ["X-Custom"],
      allow_methods: ["GET", "POST"],
    });
    const ok = await preflight(`${srv.url}/threads`, "https://team.example.org");
    t.equal(ok.headers.get("access-control-allow-origin"), "https://team.example.org");
    t.equal(ok.headers.get("access-control-allow-credentials"), "true");
    t.equal(ok.headers.get("access-control-allow-methods"), "GET, POST");
    const bad = await preflight(`${srv.url}/threads`, "https://evil.example.org.attacker.net");
    t.equal(bad.headers.get("access-control-allow-origin"), null);
    const res = await fetch(`${srv.url}/ok`, { headers: { origin: "https://team.example.org" } });
    t.equal(res.headers.get("access-control-expose-headers"), "X-Custom, Content-Location, X-Pagination-Total", "the SDK's headers are always exposed");
  });
});

t.test("corsOptions: '*' with credentials echoes the origin instead", async (t) => {
  t.equal(corsOptions({ allow_origins: ["*"], allow_credentials: true }).origin, true);
  t.equal(corsOptions({ allow_origins: ["*"] }).origin, "*");
  t.same(corsOptions({}).origin, [], "an empty policy allows no origin");
});
