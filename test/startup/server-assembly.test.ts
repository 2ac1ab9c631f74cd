import t from "tap";
import { mkdtemp, rm } from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { once } from "node:events";
import { loadConfig } from "../../src/config.js";
import { startServer } from "../../src/server.js";
import { startTestServer, TEST_GRAPHS } from "../support/server.js";

/** server.ts builds its parts on one stack: a failed start and close() tear them down the same way, in order. */

/** Rejects if `promise` takes longer than `ms` (a deadline for a shutdown that must not hang). */
function within<T>(ms: number, promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms`)), ms);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

t.test("a start that fails late (port taken) closes what it built: the data directory opens again at once", async (t) => {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), "assembly-"));
  const blocker = net.createServer();
  blocker.listen(0, "127.0.0.1");
  await once(blocker, "listening");
  t.teardown(async () => {
    await new Promise<void>((resolve) => blocker.close(() => resolve()));
    await rm(dataDir, { recursive: true, force: true });
  });
  const env = { LANGGRAPH_JSON: TEST_GRAPHS, LOG_LEVEL: "silent", HOST: "127.0.0.1", DATA_DIR: dataDir };
  const taken = String((blocker.address() as net.AddressInfo).port);
  await t.rejects(startServer(loadConfig({ ...env, PORT: taken })), /already in use/);
  // The log and the read models hold their files exclusively: this start works only if the failed one closed them.
  const server = await startServer(loadConfig({ ...env, PORT: "0" }));
  t.teardown(() => server.close());
  t.equal((await fetch(`${server.url}/ok`)).status, 200);
});

t.test("close() ends the open run streams before HTTP's close waits for them", async (t) => {
  const srv = await startTestServer();
  let closed = false;
  t.teardown(() => (closed ? undefined : srv.close()));
  const thread = await srv.client.threads.create();
  // A run that waits a minute; the worker's stop leaves it claimed for the next start, so no end event comes.
  const run = await srv.client.runs.create(thread.thread_id, "delay", { input: { delay: 60_000 } });
  const res = await fetch(`${srv.url}/threads/${thread.thread_id}/runs/${run.run_id}/stream`, { headers: { "Last-Event-ID": "-1" } });
  t.equal(res.status, 200);
  const reader = res.body!.getReader();
  let text = "";
  while (!text.includes("event: metadata")) {
    const chunk = await within(10_000, reader.read(), "the first event");
    if (chunk.done) break;
    text += new TextDecoder().decode(chunk.value);
  }
  t.match(text, /event: metadata/, "the stream is open");
  await within(10_000, srv.close(), "close()");
  closed = true;
  const drain = async () => {
    for (;;) if ((await reader.read()).done) return;
  };
  await within(10_000, drain(), "the stream");
  t.pass("the stream ended and close() resolved");
});

t.test("the server answers before the graph runtime is loaded; a run and a state read wait for it", async (t) => {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), "assembly-"));
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  const server = await startServer(loadConfig({ LANGGRAPH_JSON: TEST_GRAPHS, LOG_LEVEL: "silent", HOST: "127.0.0.1", PORT: "0", DATA_DIR: dataDir }), {
    beforeGraphRuntime: () => held,
  });
  t.teardown(async () => {
    release();
    await server.close();
    await rm(dataDir, { recursive: true, force: true });
  });
  let ready = false;
  void server.ready.then(() => (ready = true));
  const post = (url: string, body: unknown) =>
    fetch(`${server.url}${url}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  const [ok, created, assistants] = await Promise.all([fetch(`${server.url}/ok`), post("/threads", {}), post("/assistants/search", { graph_id: "agent" })]);
  t.equal(ok.status, 200);
  t.equal(created.status, 200);
  t.same(
    ((await assistants.json()) as { graph_id: string }[]).map((a) => a.graph_id),
    ["agent"],
    "default assistants exist before the graphs load",
  );
  const { thread_id } = (await created.json()) as { thread_id: string };
  const run = (await (
    await post(`/threads/${thread_id}/runs`, { assistant_id: "agent", input: { messages: [{ role: "user", content: "early" }] } })
  ).json()) as { run_id: string; status: string };
  t.equal(run.status, "pending", "the run is accepted and waits in the log for the worker");
  const joined = fetch(`${server.url}/threads/${thread_id}/runs/${run.run_id}/join`);
  const state = fetch(`${server.url}/threads/${thread_id}/state`);
  t.notOk(ready, "the graph runtime is still held back");
  t.equal(((await (await fetch(`${server.url}/info`)).json()) as { graph_runtime: string }).graph_runtime, "loading");
  release();
  const result = await joined;
  t.equal(result.status, 200);
  t.match(await result.json(), { messages: [{ content: "early" }, { content: "You said: early" }] });
  t.equal((await state).status, 200);
  await server.ready;
  t.ok(ready, "ready settled once the runtime loaded");
  t.equal(((await (await fetch(`${server.url}/info`)).json()) as { graph_runtime: string }).graph_runtime, "ready");
});
