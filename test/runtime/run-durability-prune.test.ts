import t from "tap";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@langchain/langgraph-sdk";
import { loadConfig } from "../../src/config.js";
import { startServer } from "../../src/server.js";
import { checkpointStream } from "../../src/domain/checkpoint-events.js";
import { FakeClock } from "../support/fake-clock.js";
import { startTestServer, TEST_GRAPHS, type TestServer } from "../support/server.js";
import { signToken } from "../auth/jwt.js";

/**
 * The smaller run-API fields of the official server, through the SDK against the real server:
 * `durability` (counted as CheckpointSaved events in the log), `POST /threads/prune` with both
 * strategies (and custom auth), and a TTL set by `PATCH /threads/{id}` (the sweeper, fake clock).
 */

const human = (content: string) => ({ role: "user", content });
type Values = { messages: { content: string }[] };
const contents = (values: unknown) => (values as Values).messages.map((m) => m.content);

async function checkpointsSaved(srv: TestServer, threadId: string): Promise<number> {
  const events = await srv.server.store.readStream(checkpointStream(threadId));
  return events.filter((e) => e.type === "CheckpointSaved").length;
}

t.test("durability", async (t) => {
  const srv = await startTestServer();
  t.teardown(() => srv.close());

  t.test("sync and async (the default) write one checkpoint per step; exit only the final one", async (t) => {
    const perStep: Record<string, number> = {};
    for (const durability of ["sync", "async", undefined] as const) {
      const thread = await srv.client.threads.create();
      let steps = 0;
      for await (const part of srv.client.runs.stream(thread.thread_id, "agent", {
        input: { messages: [human("hi")] },
        streamMode: ["checkpoints"],
        ...(durability ? { durability } : {}),
      })) {
        if (part.event === "checkpoints") steps++;
      }
      perStep[durability ?? "default"] = await checkpointsSaved(srv, thread.thread_id);
      t.ok(steps >= 2, `${durability ?? "default"}: the graph took ${steps} steps`);
      t.equal(perStep[durability ?? "default"], steps, `${durability ?? "default"}: one CheckpointSaved per step`);
    }

    const thread = await srv.client.threads.create();
    await srv.client.runs.wait(thread.thread_id, "agent", { input: { messages: [human("one")] }, durability: "exit" });
    t.equal(await checkpointsSaved(srv, thread.thread_id), 1, "exit: exactly one checkpoint for the run");
    await srv.client.runs.wait(thread.thread_id, "agent", { input: { messages: [human("two")] }, durability: "exit" });
    t.equal(await checkpointsSaved(srv, thread.thread_id), 2, "exit: one more for the next run");
    const state = await srv.client.threads.getState(thread.thread_id);
    t.same(contents(state.values), ["one", "You said: one", "two", "You said: two"], "the final checkpoints carry the whole state");
    t.equal((await srv.client.threads.getHistory(thread.thread_id)).length, 2);
    const [run] = await srv.client.runs.list(thread.thread_id, { limit: 1 });
    t.match((run as unknown as { kwargs: unknown }).kwargs, { durability: "exit" }, "the run records it");
  });

  t.test("the deprecated checkpoint_during: false means exit, true async", async (t) => {
    const off = await srv.client.threads.create();
    await srv.client.runs.wait(off.thread_id, "agent", { input: { messages: [human("x")] }, checkpointDuring: false });
    t.equal(await checkpointsSaved(srv, off.thread_id), 1);
    const on = await srv.client.threads.create();
    await srv.client.runs.wait(on.thread_id, "agent", { input: { messages: [human("x")] }, checkpointDuring: true });
    t.ok((await checkpointsSaved(srv, on.thread_id)) > 1);
  });

  t.test("an unknown durability is a 422", async (t) => {
    const thread = await srv.client.threads.create();
    const res = await fetch(`${srv.url}/threads/${thread.thread_id}/runs`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ assistant_id: "agent", durability: "never" }),
    });
    t.equal(res.status, 422);
    t.match(await res.json(), { detail: /durability/ });
  });
});

t.test("POST /threads/prune", async (t) => {
  const srv = await startTestServer();
  t.teardown(() => srv.close());
  const threadWithRuns = async (...inputs: string[]) => {
    const thread = await srv.client.threads.create();
    for (const input of inputs) await srv.client.runs.wait(thread.thread_id, "agent", { input: { messages: [human(input)] } });
    return thread.thread_id;
  };

  t.test("keep_latest: the thread and its state stay, its older checkpoints go", async (t) => {
    const tid = await threadWithRuns("one", "two");
    const before = await srv.client.threads.getHistory(tid, { limit: 100 });
    t.ok(before.length > 2);
    const missing = "00000000-0000-4000-8000-000000000000";
    t.same(await srv.client.threads.prune([tid, missing], { strategy: "keep_latest" }), { pruned_count: 1 }, "an unknown thread is not counted");
    const after = await srv.client.threads.getHistory(tid, { limit: 100 });
    t.equal(after.length, 1, "one checkpoint left");
    t.equal(after[0].checkpoint.checkpoint_id, before[0].checkpoint.checkpoint_id, "the latest");
    t.same(contents((await srv.client.threads.getState(tid)).values), ["one", "You said: one", "two", "You said: two"]);
    t.equal((await srv.client.threads.get(tid)).status, "idle");
    await srv.client.runs.wait(tid, "agent", { input: { messages: [human("three")] } });
    t.same(contents((await srv.client.threads.getState(tid)).values).slice(-2), ["three", "You said: three"], "runs go on from it");
    t.same(await srv.client.threads.prune([tid], { strategy: "keep_latest" }), { pruned_count: 1 });
    t.equal((await srv.client.threads.getHistory(tid, { limit: 100 })).length, 1);
  });

  t.test("delete (the default): the threads are gone", async (t) => {
    const a = await threadWithRuns("a");
    const b = await threadWithRuns();
    const kept = await threadWithRuns();
    t.same(await srv.client.threads.prune([a, b, a]), { pruned_count: 2 }, "each thread once");
    for (const id of [a, b]) t.equal((await fetch(`${srv.url}/threads/${id}`)).status, 404);
    t.equal((await fetch(`${srv.url}/threads/${kept}`)).status, 200);
    t.same(await srv.client.threads.prune([a]), { pruned_count: 0 }, "already gone");
  });

  t.test("bad input: 422", async (t) => {
    const send = (body: unknown) =>
      fetch(`${srv.url}/threads/prune`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    for (const body of [{}, { thread_ids: ["nope"] }, { thread_ids: [], strategy: "keep_none" }, { thread_ids: [], extra: 1 }]) {
      const res = await send(body);
      t.equal(res.status, 422, JSON.stringify(body));
    }
    t.same(await (await send({ thread_ids: [] })).json(), { pruned_count: 0 });
  });
});

t.test("prune with custom auth: another user's threads are skipped", async (t) => {
  const project = path.join(path.join(path.dirname(fileURLToPath(import.meta.url)), ".."), "auth", "langgraph.json");
  const srv = await startTestServer({ env: { LANGGRAPH_JSON: project } });
  t.teardown(() => srv.close());
  const scopes = ["threads:read", "threads:write", "assistants:read", "assistants:write"];
  const alice = new Client({ apiUrl: srv.url, defaultHeaders: { authorization: `Bearer ${await signToken("alice", scopes)}` } });
  const bob = new Client({ apiUrl: srv.url, defaultHeaders: { authorization: `Bearer ${await signToken("bob", scopes)}` } });
  const hers = await alice.threads.create();
  const his = await bob.threads.create();
  t.same(await bob.threads.prune([hers.thread_id, his.thread_id]), { pruned_count: 1 });
  t.equal((await alice.threads.get(hers.thread_id)).thread_id, hers.thread_id, "hers is still there");
  await t.rejects(bob.threads.get(his.thread_id), /404|not found/i);
});

t.test("PATCH /threads/{id} with a ttl: the sweeper deletes the thread when it runs out", async (t) => {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), "patch-ttl-"));
  const clock = new FakeClock(Date.now());
  const server = await startServer(loadConfig({ LANGGRAPH_JSON: TEST_GRAPHS, LOG_LEVEL: "silent", HOST: "127.0.0.1", PORT: "0", DATA_DIR: dataDir }), {
    clock,
  });
  t.teardown(async () => {
    await server.close();
    await rm(dataDir, { recursive: true, force: true });
  });
  const client = new Client({ apiUrl: server.url, apiKey: null });
  const short = await client.threads.create({ metadata: { n: 1 } });
  const long = await client.threads.create();
  const none = await client.threads.create();
  t.same(clock.pending(), [], "no TTL yet: no timer");

  const patched = await client.threads.update(short.thread_id, { metadata: { n: 2 }, ttl: 10 });
  t.same(patched.metadata, { n: 2 }, "the metadata is patched with it");
  const res = await fetch(`${server.url}/threads/${long.thread_id}`, {
    method: "PATCH",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ ttl: { ttl: 60, strategy: "delete" } }),
  });
  t.equal(res.status, 200);
  const bad = await fetch(`${server.url}/threads/${none.thread_id}`, {
    method: "PATCH",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ ttl: { ttl: 5, strategy: "keep_latest" } }),
  });
  t.equal(bad.status, 422, "only the delete strategy");
  const negative = await fetch(`${server.url}/threads/${none.thread_id}`, {
    method: "PATCH",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ ttl: -1 }),
  });
  t.equal(negative.status, 422);

  await clock.advance(11 * 60_000);
  await server.ttlSweeper.sweep();
  t.equal((await fetch(`${server.url}/threads/${short.thread_id}`)).status, 404, "10 minutes: deleted");
  t.equal((await fetch(`${server.url}/threads/${long.thread_id}`)).status, 200, "60 minutes: not yet");
  t.equal((await fetch(`${server.url}/threads/${none.thread_id}`)).status, 200, "no TTL: kept");
  await clock.advance(50 * 60_000);
  await server.ttlSweeper.sweep();
  t.equal((await fetch(`${server.url}/threads/${long.thread_id}`)).status, 404, "60 minutes: deleted");
  t.equal((await fetch(`${server.url}/threads/${none.thread_id}`)).status, 200);
});
