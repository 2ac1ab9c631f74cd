import t from "tap";
import { WebSocket } from "ws";
import { startTestServer, type TestServer } from "../support/server.js";
import { startEsdbTestDouble } from "../support/esdb-test-double.js";
import { LOG_LIMITS, REQUEST_LIMITS } from "../../src/util/json-limits.js";

/**
 * The trust boundary's input limits on every edge, through a real server: JSON nested too deep, an
 * object with too many keys, or a value too large to store answers 4xx (a JSON-RPC -32602 on A2A and
 * MCP, an error frame on the WebSocket) naming the field and the limit; nothing of it reaches the log,
 * other callers are served, and a restart on the same data starts. Run on both stores.
 */

const nest = (depth: number, leaf: unknown = 1): unknown => {
  let value: unknown = leaf;
  for (let i = 0; i < depth; i++) value = [value];
  return value;
};
/** JSON text nested `depth` levels, made as text: JSON.stringify itself cannot make the deepest ones. */
const deepText = (depth: number) => "[".repeat(depth) + "]".repeat(depth);
const manyKeys = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, i]));

/** What the tests read of a JSON answer: an HTTP error's detail, or a JSON-RPC answer's id and error. */
interface Answer {
  detail?: string;
  id?: string | number | null;
  error?: { code: number; message: string };
}

async function send(srv: TestServer, method: string, path: string, body: string, headers: Record<string, string> = {}) {
  const res = await fetch(srv.url + path, { method, headers: { "content-type": "application/json", ...headers }, body });
  const text = await res.text();
  let json: Answer | undefined;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, json, text };
}

const MCP_HEADERS = { accept: "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18" };

async function edgesRefuseAndServeOn(t: typeof import("tap").default, name: string, start: () => Promise<TestServer>) {
  t.test(name, async (t) => {
    let srv = await start();
    t.teardown(() => srv.close());
    const assistants = await srv.client.assistants.search({ graphId: "agent" });
    const assistantId = assistants[0]!.assistant_id;
    const thread = await srv.client.threads.create({ metadata: { owner: "alice" } });

    t.test("REST: a run input nested deeper than the limit is 422 naming the field, at any depth", async (t) => {
      for (const depth of [REQUEST_LIMITS.maxDepth + 1, 3000, 10_000, 200_000]) {
        const body = `{"assistant_id":"${assistantId}","input":{"messages":[],"x":${deepText(depth)}}}`;
        for (const path of ["/runs", "/runs/wait", "/runs/stream", `/threads/${thread.thread_id}/runs/wait`]) {
          const res = await send(srv, "POST", path, body);
          t.equal(res.status, 422, `${path} at depth ${depth}`);
          t.match(res.json?.detail, /^body\.input\.x\[0\].*nested deeper than 100 levels/, "names the field and the limit");
          t.notMatch(res.text, /call stack/i, "never the stack's message");
        }
      }
      const atLimit = await send(
        srv,
        "POST",
        "/runs/wait",
        JSON.stringify({ assistant_id: assistantId, input: { messages: [], x: nest(REQUEST_LIMITS.maxDepth - 3) } }),
      );
      t.equal(atLimit.status, 200, "a value within the limit runs");
    });

    t.test("REST: deep or over-wide metadata is 422 on threads, assistants, crons and the store", async (t) => {
      let deepObject: unknown = 1;
      for (let i = 0; i < 1100; i++) deepObject = { a: deepObject };
      const deepMeta = JSON.stringify({ metadata: { m: deepObject } });
      for (const [method, path, body] of [
        ["POST", "/threads", deepMeta],
        ["PATCH", `/threads/${thread.thread_id}`, deepMeta],
        ["POST", "/assistants", JSON.stringify({ graph_id: "agent", metadata: { m: deepObject } })],
        ["POST", "/runs/crons", JSON.stringify({ assistant_id: assistantId, schedule: "0 0 1 1 *", input: { m: deepObject } })],
        ["PUT", "/store/items", JSON.stringify({ namespace: ["n"], key: "k", value: { m: deepObject } })],
        ["POST", "/threads", JSON.stringify({ metadata: manyKeys(REQUEST_LIMITS.maxKeys + 1) })],
      ] as const) {
        const res = await send(srv, method, path, body);
        t.equal(res.status, 422, `${method} ${path}`);
        t.match(res.json?.detail, /^body\.(metadata|input|value)/, "names the field");
      }
      for (const path of ["/threads/search", "/threads/count", "/assistants/search", "/assistants/count", "/runs/crons/search", "/runs/crons/count"]) {
        t.equal((await send(srv, "POST", path, "{}")).status, 200, `${path} still answers`);
      }
    });

    t.test("REST: a value too large for one event is 413, not 500", async (t) => {
      const big = "x".repeat(1_100_000);
      const thread413 = await send(srv, "POST", "/threads", JSON.stringify({ metadata: { big } }));
      t.equal(thread413.status, 413);
      t.match(thread413.json?.detail, /thread's metadata.*at most \d+ bytes/);
      const store413 = await send(srv, "PUT", "/store/items", JSON.stringify({ namespace: ["n"], key: "big", value: { big } }));
      t.equal(store413.status, 413);
      t.match(store413.json?.detail, /store item's value/);
      const update413 = await send(srv, "PATCH", `/threads/${thread.thread_id}`, JSON.stringify({ metadata: { big } }));
      t.equal(update413.status, 413);
      t.same((await srv.client.threads.get(thread.thread_id)).metadata, { owner: "alice" }, "the stored thread is unchanged");
    });

    t.test("A2A and MCP: -32602 with the request's id", async (t) => {
      const a2a = await send(
        srv,
        "POST",
        `/a2a/${assistantId}`,
        JSON.stringify({
          jsonrpc: "2.0",
          id: "deep-1",
          method: "message/send",
          params: { message: { role: "user", messageId: "m1", parts: [{ kind: "data", data: { x: nest(500) } }] } },
        }),
      );
      t.equal(a2a.json?.id, "deep-1");
      t.equal(a2a.json?.error?.code, -32602);
      t.match(a2a.json?.error?.message, /params\.message\.parts\[0\].*nested deeper than 100 levels/);
      const a2aText = await send(
        srv,
        "POST",
        `/a2a/${assistantId}`,
        `{"jsonrpc":"2.0","id":"deep-2","method":"message/send","params":{"x":${deepText(50_000)}}}`,
      );
      t.equal(a2aText.json?.error?.code, -32602, "JSON deeper than any stack is refused the same way");

      const mcp = await send(
        srv,
        "POST",
        "/mcp",
        JSON.stringify({ jsonrpc: "2.0", id: 7, method: "tools/call", params: { name: "agent", arguments: { x: nest(500) } } }),
        MCP_HEADERS,
      );
      t.equal(mcp.json?.id, 7);
      t.equal(mcp.json?.error?.code, -32602);
      t.match(mcp.json?.error?.message, /params\.arguments\.x.*nested deeper/);
    });

    t.test("protocol v2: /commands answers 422, a WebSocket frame an error frame, and the socket goes on", async (t) => {
      const cmd = await send(
        srv,
        "POST",
        `/threads/${thread.thread_id}/commands`,
        `{"id":1,"method":"run.start","params":{"assistant_id":"${assistantId}","input":${deepText(10_000)}}}`,
      );
      t.equal(cmd.status, 422);
      t.notMatch(cmd.text, /call stack/i);

      const ws = new WebSocket(`${srv.url.replace("http", "ws")}/threads/${thread.thread_id}/stream/events`);
      const frames: { type: string; id?: number; error?: string; message?: string }[] = [];
      const next = () =>
        new Promise<(typeof frames)[number]>((resolve) => {
          if (frames.length) return resolve(frames.shift()!);
          ws.once("message", () => resolve(frames.shift()!));
        });
      ws.on("message", (data) => frames.push(JSON.parse(String(data))));
      await new Promise((resolve, reject) => {
        ws.once("open", resolve);
        ws.once("error", reject);
      });
      t.teardown(() => ws.close());
      ws.send(`{"id":5,"method":"run.start","params":{"input":${deepText(REQUEST_LIMITS.maxDepth + 5)}}}`);
      const refused = await next();
      t.match(refused, { type: "error", id: 5, error: "invalid_argument" });
      t.match(refused.message, /frame\.params\.input.*nested deeper than 100 levels/);
      ws.send(JSON.stringify({ id: 6, method: "subscription.subscribe", params: { channels: ["lifecycle"] } }));
      t.match(await next(), { type: "success", id: 6 }, "the socket keeps serving");
    });

    t.test("nothing refused reached the log; the server serves and restarts on the same data", async (t) => {
      const ok = await fetch(srv.url + "/ok");
      t.equal(ok.status, 200);
      const threads = await srv.client.threads.search({ limit: 100 });
      t.ok(
        threads.every((th) => JSON.stringify(th.metadata).length < 1000),
        "no refused metadata was stored",
      );
      srv = await srv.restart();
      t.equal((await fetch(srv.url + "/ok")).status, 200, "a restart on the same data starts");
      const again = await srv.client.runs.wait(null, assistantId, { input: { messages: [{ role: "user", content: "hi" }] } });
      t.ok(again, "and runs");
    });
  });
}

/** The log's own boundary: what a graph makes from its input is refused at the store when beyond LOG_LIMITS. */
t.test("limits sit well under what SQLite's JSON functions and the folds read", async (t) => {
  t.ok(LOG_LIMITS.maxDepth < 1000);
});

await edgesRefuseAndServeOn(t, "embedded SQLite", () => startTestServer());
await edgesRefuseAndServeOn(t, "EventStoreDB double", async () => {
  const double = await startEsdbTestDouble();
  /** The server's close also stops the double; a restart keeps it. */
  const withDouble = (s: TestServer): TestServer => ({
    ...s,
    close: async () => {
      await s.close();
      await double.close();
    },
    restart: async (options) => withDouble(await s.restart(options)),
  });
  return withDouble(await startTestServer({ env: { EVENTSTORE_URL: double.connectionString } }));
});
