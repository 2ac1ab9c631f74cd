import t from "tap";
import { Client } from "@langchain/langgraph-sdk";
import { startTestServer } from "../support/server.js";

/** API key, OpenAPI and docs, unknown routes. */

t.test("with LANGGRAPH_API_KEY every route but /ok, /info, /docs, /openapi.json needs x-api-key", async (t) => {
  const srv = await startTestServer({ env: { LANGGRAPH_API_KEY: "s3cret-key" } });
  t.teardown(() => srv.close());
  for (const path of ["/ok", "/info", "/openapi.json", "/docs"]) {
    const res = await fetch(`${srv.url}${path}`, { redirect: "manual" });
    t.ok(res.status < 400, `${path} is public (${res.status})`);
  }
  const anonymous = await fetch(`${srv.url}/assistants/search`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
  t.equal(anonymous.status, 401);
  t.match(((await anonymous.json()) as { detail: string }).detail, /API key/);
  const wrong = await fetch(`${srv.url}/threads`, { method: "POST", headers: { "content-type": "application/json", "x-api-key": "s3cret-kez" }, body: "{}" });
  t.equal(wrong.status, 401);
  const unknownRoute = await fetch(`${srv.url}/nothing-here`);
  t.equal(unknownRoute.status, 401, "no route listing for anonymous callers");

  const sdk = srv.client; // configured with the key
  const thread = await sdk.threads.create();
  t.ok(thread.thread_id, "the SDK's x-api-key is accepted");
  const noKey = new Client({ apiUrl: srv.url, apiKey: null });
  await t.rejects(noKey.threads.get(thread.thread_id), /401/);
  t.equal(await sdk.threads.count(), 1, "rejected calls stored nothing");
});

t.test("OpenAPI document and docs are generated from the route schemas", async (t) => {
  const srv = await startTestServer();
  t.teardown(() => srv.close());
  const res = await fetch(`${srv.url}/openapi.json`);
  t.equal(res.status, 200);
  const doc = (await res.json()) as {
    openapi: string;
    paths: Record<
      string,
      Record<string, { requestBody?: { content: Record<string, { schema: { properties?: Record<string, unknown>; required?: string[] } }> } }>
    >;
  };
  t.match(doc.openapi, /^3\./);
  for (const path of ["/assistants", "/assistants/search", "/threads", "/threads/{thread_id}", "/threads/{thread_id}/state", "/threads/{thread_id}/history"]) {
    t.ok(doc.paths[path], `documents ${path}`);
  }
  const createAssistant = doc.paths["/assistants"].post.requestBody!.content["application/json"].schema;
  t.ok(createAssistant.properties?.graph_id, "body schema comes from the zod schema");
  t.same(createAssistant.required, ["graph_id"]);
  const docs = await fetch(`${srv.url}/docs`);
  t.equal(docs.status, 200);
  t.match(docs.headers.get("content-type"), /html/);
  const missing = await fetch(`${srv.url}/nothing-here`);
  t.equal(missing.status, 404);
  t.match(((await missing.json()) as { detail: string }).detail, /Not Found/);
});
