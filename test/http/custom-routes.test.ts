import t, { type Test } from "tap";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Client } from "@langchain/langgraph-sdk";
import { repoRoot, startTestServer } from "../support/server.js";

/** `http.app` (a Hono app before the built-in routes), `http.disable_*`, `http.mount_prefix`. */

const PARITY = path.join(repoRoot, "test", "graphs", "parity", "langgraph.json");

/** A langgraph.json in a temp dir (graph paths point back at the test graphs). */
async function configFile(t: Test, json: Record<string, unknown>): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "agent-server-cfg-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const file = path.join(dir, "langgraph.json");
  await writeFile(file, JSON.stringify(json));
  return file;
}
const graphsDir = path.join(repoRoot, "test", "graphs");

t.test("a Hono app: its routes answer first, its middleware wraps the built-in routes", async (t) => {
  const srv = await startTestServer({ env: { LANGGRAPH_JSON: PARITY } });
  t.teardown(() => srv.close());

  const mine = await fetch(`${srv.url}/custom/my-route`, { headers: { "x-custom-input": "hey" } });
  t.equal(mine.status, 200);
  t.same(await mine.json(), { foo: "bar" });
  t.equal(mine.headers.get("x-custom-output"), "hey");
  t.equal(mine.headers.get("x-js-middleware"), "true", "middleware runs around custom routes");
  t.ok(mine.headers.get("access-control-allow-origin"), "custom answers keep the CORS headers");

  const shadow = await fetch(`${srv.url}/runs/afakeroute`);
  t.same(await shadow.json(), { foo: "afakeroute" }, "a custom route wins over the built-in path space");

  const error = await fetch(`${srv.url}/custom/error`);
  t.equal(error.status, 400);
  t.equal(await error.text(), "Bad request", "Hono's HTTPException answer");

  const streamed = await fetch(`${srv.url}/custom/streaming`);
  t.equal(await streamed.text(), "Count: 0\nCount: 1\nCount: 2\n");

  const intercepted = await fetch(`${srv.url}/threads/search?interrupt=1`, { method: "POST", body: "{}", headers: { "content-type": "application/json" } });
  t.same(await intercepted.json(), { status: "interrupted" }, "middleware may answer instead of a built-in route");

  // Built-in routes still work through the SDK, wrapped by the middleware.
  const thread = await srv.client.threads.create({ metadata: { via: "sdk" } });
  const raw = await fetch(`${srv.url}/threads/${thread.thread_id}`);
  t.equal(raw.status, 200);
  t.equal(raw.headers.get("x-js-middleware"), "true", "middleware headers on a built-in answer");
  t.same(((await raw.json()) as { metadata: unknown }).metadata, { via: "sdk" });

  // A body the middleware changed is what the built-in route gets.
  const headerClient = new Client({ apiUrl: srv.url, defaultHeaders: { "x-configurable-header": "from-header" } });
  const run = await headerClient.runs.create(thread.thread_id, "agent", { input: { messages: [{ role: "human", content: "hi" }] } });
  t.equal(
    (run as unknown as { kwargs: { config: { configurable: Record<string, unknown> } } }).kwargs.config.configurable["x-configurable-header"],
    "from-header",
  );
  await srv.client.runs.join(thread.thread_id, run.run_id);

  const missing = await fetch(`${srv.url}/nothing-here`);
  t.equal(missing.status, 404, "unknown paths still get the server's 404 (the app's notFound is not used, as officially)");
  t.match(((await missing.json()) as { detail: string }).detail, /Not Found/);
});

t.test("a custom route calls the server's API in-process with the SDK's Client()", async (t) => {
  const srv = await startTestServer({ env: { LANGGRAPH_JSON: PARITY } });
  t.teardown(() => srv.close());
  const res = await fetch(`${srv.url}/custom/client`);
  t.equal(res.status, 200);
  const { result } = (await res.json()) as { result: { messages: { content: string }[] } };
  t.equal(result.messages.at(-1)?.content, "You said: in-process");
});

t.test("a plain object with fetch(Request): a 404 answer falls through", async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), "agent-server-app-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await writeFile(
    path.join(dir, "app.mjs"),
    `export default { async fetch(req) {
    const url = new URL(req.url);
    if (url.pathname === "/hello") return Response.json({ hello: await req.text() || "world" });
    return new Response("no", { status: 404 });
  } };`,
  );
  await writeFile(
    path.join(dir, "langgraph.json"),
    JSON.stringify({ graphs: { agent: path.join(graphsDir, "agent.ts") + ":graph" }, http: { app: "./app.mjs" } }),
  );
  const srv = await startTestServer({ env: { LANGGRAPH_JSON: path.join(dir, "langgraph.json") } });
  t.teardown(() => srv.close());
  t.same(await (await fetch(`${srv.url}/hello`)).json(), { hello: "world" });
  t.same(await (await fetch(`${srv.url}/hello`, { method: "POST", body: "body" })).json(), { hello: "body" });
  const thread = await srv.client.threads.create();
  t.ok(thread.thread_id, "built-in routes behind the app");
  t.equal((await srv.client.threads.get(thread.thread_id)).thread_id, thread.thread_id);
});

t.test("an http.app that cannot be loaded stops the start with one line", async (t) => {
  const file = await configFile(t, {
    graphs: { agent: path.join(graphsDir, "agent.ts") + ":graph" },
    http: { app: path.join(graphsDir, "parity", "app.ts") + ":nope" },
  });
  await t.rejects(startTestServer({ env: { LANGGRAPH_JSON: file } }), /http\.app: .*app\.ts has no export "nope"/);
});

t.test("http.disable_* leave route groups out; http.mount_prefix serves everything under the prefix", async (t) => {
  const file = await configFile(t, {
    graphs: { agent: path.join(graphsDir, "agent.ts") + ":graph" },
    http: { disable_assistants: true, disable_runs: true, mount_prefix: "/my-api/" },
  });
  const srv = await startTestServer({ env: { LANGGRAPH_JSON: file } });
  t.teardown(() => srv.close());
  const client = new Client({ apiUrl: `${srv.url}/my-api` });
  const thread = await client.threads.create();
  t.ok(thread.thread_id, "threads under the prefix");
  t.equal((await fetch(`${srv.url}/my-api/ok`)).status, 200);
  t.equal((await fetch(`${srv.url}/ok`)).status, 404, "nothing outside the prefix");
  const outside = await fetch(`${srv.url}/threads/${thread.thread_id}`);
  t.equal(outside.status, 404);
  t.match(((await outside.json()) as { detail: string }).detail, new RegExp(`/threads/${thread.thread_id}$`));
  t.equal(
    (await fetch(`${srv.url}/my-api/assistants/search`, { method: "POST", body: "{}", headers: { "content-type": "application/json" } })).status,
    404,
    "assistants disabled",
  );
  t.equal((await fetch(`${srv.url}/my-api/threads/${thread.thread_id}/runs`)).status, 404, "runs disabled");

  const metaOff = await configFile(t, { graphs: { agent: path.join(graphsDir, "agent.ts") + ":graph" }, http: { disable_meta: true, disable_threads: true } });
  const srv2 = await startTestServer({ env: { LANGGRAPH_JSON: metaOff } });
  t.teardown(() => srv2.close());
  t.equal((await fetch(`${srv2.url}/info`)).status, 404);
  t.equal((await fetch(`${srv2.url}/threads`, { method: "POST", body: "{}", headers: { "content-type": "application/json" } })).status, 404);
  t.equal((await srv2.client.assistants.search()).length, 1, "assistants still served");
});
