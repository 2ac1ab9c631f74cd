import t, { type Test } from "tap";
import { request } from "undici";
import { startTestServer } from "../support/server.js";

/**
 * Forgiving bodies, as the official servers: on every route an empty body counts as absent, and
 * an absent body as `{}`, whatever the content type says (curl -X DELETE -H 'content-type:
 * application/json', fetch with a JSON header and no body, the SDK's bodiless calls). A body that
 * is present and wrong is still a 422 naming the field. Raw requests (undici), so the exact
 * headers and bytes are the test's.
 */

const server = await startTestServer();
t.teardown(() => server.close());
const { client } = server;

/** How an empty body is sent: no headers at all, or a content type with zero bytes. */
const VARIANTS: { name: string; headers: Record<string, string>; body?: string }[] = [
  { name: "no body, no content type", headers: {} },
  { name: "content-type: application/json, no body", headers: { "content-type": "application/json" } },
  { name: "content-type: application/json, content-length: 0", headers: { "content-type": "application/json", "content-length": "0" }, body: "" },
  { name: "content-type: application/json; charset=utf-8, blank body", headers: { "content-type": "application/json; charset=utf-8" }, body: " \r\n" },
  { name: "content-type: text/plain, no body", headers: { "content-type": "text/plain" } },
];

async function send(method: "POST" | "PATCH" | "DELETE" | "PUT", path: string, headers: Record<string, string>, body?: string) {
  const res = await request(`${server.url}${path}`, { method, headers, body });
  const text = await res.body.text();
  return { status: res.statusCode, text, json: text ? JSON.parse(text) : undefined };
}

const newThread = async () => (await client.threads.create()).thread_id;
const newAssistant = async () => (await client.assistants.create({ graphId: "agent" })).assistant_id;
const newCron = async () => (await client.crons.create("agent", { schedule: "0 0 1 1 *" })).cron_id;
const finishedRun = async () => {
  const thread = await newThread();
  const run = await client.runs.create(thread, "agent", { input: { messages: [{ role: "user", content: "hi" }] } });
  await client.runs.join(thread, run.run_id);
  return `/threads/${thread}/runs/${run.run_id}`;
};

/** Routes whose body is optional: the path (made fresh for each request) and what they answer. */
type Check = (t: Test, json: unknown) => Promise<void> | void;
const ROUTES: { method: "POST" | "PATCH" | "DELETE"; path: () => Promise<string>; status: number; check?: Check }[] = [
  {
    method: "POST",
    path: async () => "/threads",
    status: 200,
    check: async (t, json) => {
      const id = (json as { thread_id: string }).thread_id;
      t.match(await client.threads.get(id), { thread_id: id, metadata: {}, status: "idle" }, "the thread exists");
    },
  },
  { method: "POST", path: async () => "/threads/search", status: 200, check: (t, json) => void t.ok(Array.isArray(json), "a page of threads") },
  { method: "POST", path: async () => "/threads/count", status: 200, check: (t, json) => void t.type(json, "number") },
  { method: "POST", path: async () => `/threads/${await newThread()}/history`, status: 200, check: (t, json) => void t.ok(Array.isArray(json)) },
  { method: "POST", path: async () => `/threads/${await newThread()}/copy`, status: 200, check: (t, json) => void t.match(json, { thread_id: String }) },
  {
    method: "POST",
    path: async () => "/assistants/search",
    status: 200,
    check: (t, json) => void t.ok((json as unknown[]).length >= 1, "the default assistants"),
  },
  { method: "POST", path: async () => "/assistants/count", status: 200, check: (t, json) => void t.ok((json as number) >= 1) },
  {
    method: "POST",
    path: async () => `/assistants/${await newAssistant()}/versions`,
    status: 200,
    check: (t, json) => void t.equal((json as unknown[]).length, 1),
  },
  { method: "POST", path: async () => "/runs/crons/search", status: 200, check: (t, json) => void t.ok(Array.isArray(json)) },
  { method: "POST", path: async () => "/runs/crons/count", status: 200, check: (t, json) => void t.type(json, "number") },
  { method: "POST", path: async () => "/store/items/search", status: 200, check: (t, json) => void t.match(json, { items: Array }) },
  { method: "POST", path: async () => "/store/namespaces", status: 200, check: (t, json) => void t.match(json, { namespaces: Array }) },
  {
    method: "PATCH",
    path: async () => `/threads/${await newThread()}`,
    status: 200,
    check: (t, json) => void t.match(json, { thread_id: String, metadata: {} }),
  },
  {
    method: "PATCH",
    path: async () => `/assistants/${await newAssistant()}`,
    status: 200,
    check: (t, json) => void t.match(json, { graph_id: "agent", version: 2 }),
  },
  { method: "PATCH", path: async () => `/runs/crons/${await newCron()}`, status: 200, check: (t, json) => void t.match(json, { schedule: "0 0 1 1 *" }) },
  {
    method: "DELETE",
    path: async () => `/threads/${await newThread()}`,
    status: 204,
  },
  { method: "DELETE", path: async () => `/assistants/${await newAssistant()}`, status: 204 },
  { method: "DELETE", path: async () => `/runs/crons/${await newCron()}`, status: 204 },
  { method: "DELETE", path: finishedRun, status: 204 },
];

for (const variant of VARIANTS) {
  t.test(variant.name, async (t) => {
    for (const route of ROUTES) {
      const path = await route.path();
      const res = await send(route.method, path, variant.headers, variant.body);
      t.equal(res.status, route.status, `${route.method} ${path.replace(/[0-9a-f-]{36}/g, "{id}")} → ${route.status} (${res.text.slice(0, 120)})`);
      if (res.status === route.status) await route.check?.(t, res.json);
      if (route.method === "DELETE" && res.status === 204) {
        t.equal((await request(`${server.url}${path}`)).statusCode, 404, `${route.method} ${path.replace(/[0-9a-f-]{36}/g, "{id}")}: gone`);
      }
    }
  });
}

t.test("present and wrong, or required and absent: still 422, naming the field", async (t) => {
  const thread = await newThread();
  const json = { "content-type": "application/json" };
  const cases: [method: "POST" | "PATCH" | "DELETE" | "PUT", path: string, headers: Record<string, string>, body: string | undefined, detail: RegExp][] = [
    ["POST", "/threads", json, JSON.stringify({ metadata: 5 }), /^body\.metadata: /],
    ["POST", "/threads", { "content-type": "text/plain" }, JSON.stringify({ if_exists: "sometimes" }), /^body\.if_exists: /],
    ["PATCH", `/threads/${thread}`, json, JSON.stringify({ ttl: "soon" }), /^body\.ttl/],
    ["POST", "/threads/search", json, JSON.stringify({ limit: 0 }), /^body\.limit: /],
    ["POST", "/threads/search", json, "{", /^Invalid JSON in request body/],
    ["POST", "/threads/count", json, "null", /^body: /],
    ["POST", "/assistants", json, undefined, /^body\.graph_id: /],
    ["POST", "/assistants", {}, undefined, /^body\.graph_id: /],
    ["PUT", "/store/items", json, undefined, /^body\.namespace: /],
    ["DELETE", "/store/items", json, "", /^body\.key: |^body\.namespace: /],
    ["POST", "/runs/batch", json, "", /^body: /],
    ["POST", "/runs", {}, undefined, /^body\.assistant_id: /],
  ];
  for (const [method, path, headers, body, detail] of cases) {
    const res = await send(method, path, headers, body);
    t.equal(res.status, 422, `${method} ${path.replace(/[0-9a-f-]{36}/g, "{id}")} ${JSON.stringify(body) ?? "(no body)"} → 422 (${res.text})`);
    t.match(res.json?.detail, detail);
  }
  t.equal((await client.threads.get(thread)).thread_id, thread, "the thread was not changed away");
});
