import t from "tap";
import { startTestServer } from "../support/server.js";
import { expectErrors, type ErrorCase } from "../support/http.js";

/** Threads, thread state and history through the official SDK against the real server. */

const human = (content: string) => ({ role: "user", content });

t.test("threads", async (t) => {
  const srv = await startTestServer();
  t.teardown(() => srv.close());
  const { client } = srv;

  t.test("a new thread is exactly the documented shape", async (t) => {
    const res = await fetch(`${srv.url}/threads`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
    t.equal(res.status, 200);
    const thread = (await res.json()) as Record<string, unknown>;
    t.same(
      Object.keys(thread).sort(),
      ["config", "created_at", "interrupts", "metadata", "state_updated_at", "status", "thread_id", "updated_at", "values"].sort(),
    );
    t.match(thread.thread_id, /^[0-9a-f-]{36}$/);
    t.same(thread.metadata, {});
    t.equal(thread.status, "idle");
    t.same(thread.config, {});
    t.equal(thread.values, null);
    t.same(thread.interrupts, {});
    t.same(await client.threads.get(thread.thread_id as string), thread);
  });

  t.test("ids the server makes are UUIDv7 (time first): threads, copies, assistants and crons sort by creation", async (t) => {
    const v7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
    const threads = [];
    for (let i = 0; i < 3; i++) threads.push((await client.threads.create()).thread_id);
    const copy = (await client.threads.copy(threads[0])).thread_id;
    const assistant = (await client.assistants.create({ graphId: "agent" })).assistant_id;
    const cron = (await client.crons.create("agent", { schedule: "0 0 1 1 *" })).cron_id;
    t.teardown(() => client.crons.delete(cron));
    for (const id of [...threads, copy, assistant, cron]) t.match(id, v7, id);
    t.same([...threads, copy].sort(), [...threads, copy], "each later than the one before");
  });

  t.test("create with id, if_exists, patch merges metadata, delete, copy", async (t) => {
    const id = "5b0b0e39-3f7c-4d3c-8a59-0b7d6d2f0a01";
    const created = await client.threads.create({ threadId: id, metadata: { a: 1 } });
    t.equal(created.thread_id, id);
    await t.rejects(client.threads.create({ threadId: id }), /409/);
    t.same(await client.threads.create({ threadId: id, ifExists: "do_nothing" }), created);
    const patched = await client.threads.update(id, { metadata: { b: 2 } });
    t.same(patched.metadata, { a: 1, b: 2 });
    const copy = await client.threads.copy(id);
    t.not(copy.thread_id, id);
    t.same(copy.metadata, { a: 1, b: 2 });
    await client.threads.delete(id);
    await t.rejects(client.threads.get(id), /404/);
    t.ok(await client.threads.get(copy.thread_id), "the copy is independent of the source");
    await t.rejects(client.threads.copy(id), /409/, "copy of a missing thread → 409");
    // Created again over its tombstone: the answer is the new thread, as read back afterwards.
    const again = await client.threads.create({ threadId: id, metadata: { c: 3 } });
    t.same(again.metadata, { c: 3 });
    t.same(await client.threads.get(id), again);
  });

  t.test("search and count: metadata, ids, status, values, paging, sort, select", async (t) => {
    const tag = `t-${Date.now()}`;
    const made = [];
    for (let i = 0; i < 3; i++) made.push(await client.threads.create({ metadata: { tag, i } }));
    const found = await client.threads.search({ metadata: { tag } });
    t.same(
      found.map((x) => x.thread_id),
      made.map((x) => x.thread_id).reverse(),
      "newest first",
    );
    t.same(
      (await client.threads.search({ metadata: { tag }, sortBy: "created_at", sortOrder: "asc" })).map((x) => x.thread_id),
      made.map((x) => x.thread_id),
    );
    t.same(
      (await client.threads.search({ ids: [made[1].thread_id] })).map((x) => x.thread_id),
      [made[1].thread_id],
    );
    t.equal((await client.threads.search({ metadata: { tag }, status: "busy" })).length, 0);
    t.equal((await client.threads.search({ metadata: { tag }, limit: 2, offset: 2 })).length, 1);
    const sel = await client.threads.search({ metadata: { tag }, select: ["thread_id", "status"], limit: 1 });
    t.same(Object.keys(sel[0]).sort(), ["status", "thread_id"]);
    t.equal(await client.threads.count({ metadata: { tag } }), 3);
    t.equal(await client.threads.count({ metadata: { tag }, status: "idle" }), 3);
  });

  t.test("state: update, read, checkpoints, history; values follow into the thread", async (t) => {
    const thread = await client.threads.create({ graphId: "agent" });
    const empty = await client.threads.getState(thread.thread_id);
    t.same(empty.values, {});
    const updated = await client.threads.updateState(thread.thread_id, { values: { messages: [human("hello")] }, asNode: "agent" });
    const first = updated as unknown as { checkpoint: { checkpoint_id: string } };
    t.ok(first.checkpoint.checkpoint_id, "returns the new checkpoint");
    t.equal(updated.configurable?.checkpoint_id, first.checkpoint.checkpoint_id, "and the deprecated configurable form");
    const state = await client.threads.getState<{ messages: { type: string; content: string }[] }>(thread.thread_id);
    t.equal(state.values.messages.length, 1);
    t.equal(state.values.messages[0].type, "human");
    t.equal(state.values.messages[0].content, "hello");
    t.equal(state.checkpoint.checkpoint_id, first.checkpoint.checkpoint_id);
    t.same(state.next, []);
    await client.threads.updateState(thread.thread_id, { values: { messages: [human("again")] }, asNode: "agent" });
    const history = await client.threads.getHistory(thread.thread_id, { limit: 10 });
    t.equal(history.length, 2, "one state per update");
    t.equal(history[1].checkpoint.checkpoint_id, first.checkpoint.checkpoint_id, "newest first");
    const atFirst = await client.threads.getState(thread.thread_id, first.checkpoint.checkpoint_id!);
    t.equal((atFirst.values as { messages: unknown[] }).messages.length, 1, "state at an older checkpoint");
    const viaPost = await fetch(`${srv.url}/threads/${thread.thread_id}/state/checkpoint`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ checkpoint: { checkpoint_id: first.checkpoint.checkpoint_id } }),
    });
    t.equal(((await viaPost.json()) as { checkpoint: { checkpoint_id: string } }).checkpoint.checkpoint_id, first.checkpoint.checkpoint_id);
    const before = await client.threads.getHistory(thread.thread_id, {
      before: { configurable: { checkpoint_id: history[0].checkpoint.checkpoint_id } } as never,
    });
    t.equal(before.length, 1, "history before a checkpoint");
    const getHistory = await fetch(`${srv.url}/threads/${thread.thread_id}/history?limit=1`);
    t.equal(((await getHistory.json()) as unknown[]).length, 1);
    const read = await client.threads.get(thread.thread_id);
    t.equal((read.values as { messages: unknown[] }).messages.length, 2, "thread values follow its state");

    const copy = await client.threads.copy(thread.thread_id);
    const copied = await client.threads.getState(copy.thread_id);
    t.same(copied.values, (await client.threads.getState(thread.thread_id)).values, "copy carries the checkpoints");
  });

  t.test("supersteps seed a new thread's state", async (t) => {
    const thread = await client.threads.create({
      graphId: "agent",
      supersteps: [{ updates: [{ values: { messages: [human("seeded")] }, asNode: "agent" }] }],
    });
    const state = await client.threads.getState<{ messages: { content: string }[] }>(thread.thread_id);
    t.equal(state.values.messages[0].content, "seeded");
  });

  t.test("bad input: 422 naming the field, 404 for unknown ids, huge bodies 413, nothing changed", async (t) => {
    const thread = await client.threads.create({ metadata: { keep: true } });
    const cases: ErrorCase[] = [
      ["GET", "/threads/not-a-uuid", undefined, 422, /thread_id: must be a UUID/],
      ["GET", "/threads/00000000-0000-4000-8000-000000000000", undefined, 404, /not found/],
      ["PATCH", "/threads/00000000-0000-4000-8000-000000000000", { metadata: {} }, 404, /not found/],
      ["DELETE", "/threads/00000000-0000-4000-8000-000000000000", undefined, 404, /not found/],
      ["GET", "/threads/00000000-0000-4000-8000-000000000000/state", undefined, 404, /not found/],
      ["POST", "/threads", { metadata: "x" }, 422, /metadata/],
      ["POST", "/threads", { thread_id: "nope" }, 422, /thread_id/],
      ["POST", "/threads", { if_exists: "maybe" }, 422, /if_exists/],
      ["POST", "/threads", { unknown_field: 1 }, 422, /unknown_field|Unrecognized/],
      ["POST", "/threads/search", { status: "sleeping" }, 422, /status/],
      ["POST", "/threads/search", { ids: ["x"] }, 422, /ids/],
      ["PATCH", `/threads/${thread.thread_id}`, { metadata: [] }, 422, /metadata/],
      ["POST", `/threads/${thread.thread_id}/history`, { limit: "ten" }, 422, /limit/],
      ["POST", `/threads/${thread.thread_id}/state`, { values: { messages: [] } }, 400, /graph/],
    ];
    await expectErrors(t, srv.url, cases);
    const huge = await fetch(`${srv.url}/threads`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ metadata: { blob: "x".repeat(11 * 1024 * 1024) } }),
    });
    t.equal(huge.status, 413);
    t.match(((await huge.json()) as { detail: string }).detail, /too large/);
    t.same((await client.threads.get(thread.thread_id)).metadata, { keep: true }, "rejected requests changed nothing");
  });
});

t.test("threads and their state survive a restart; a second assistant continues the same thread", async (t) => {
  const first = await startTestServer();
  const thread = await first.client.threads.create({ graphId: "agent", metadata: { x: 1 } });
  await first.client.threads.updateState(thread.thread_id, { values: { messages: [human("before restart")] }, asNode: "agent" });
  const stateBefore = await first.client.threads.getState(thread.thread_id);
  const threadBefore = await first.client.threads.get(thread.thread_id);
  const again = await first.restart();
  t.teardown(() => again.close());
  t.same(await again.client.threads.get(thread.thread_id), threadBefore, "the thread (status, values, metadata, times) is the same after the restart");
  const stateAfter = await again.client.threads.getState(thread.thread_id);
  t.same(stateAfter, stateBefore, "state identical after rebuilding from the log");
  t.same((await again.client.threads.get(thread.thread_id)).metadata, { x: 1, graph_id: "agent" });
});

t.test("a thread belongs to no assistant: a second assistant continues the first one's state", async (t) => {
  const srv = await startTestServer();
  t.teardown(() => srv.close());
  const { client } = srv;
  const second = await client.assistants.create({ graphId: "factory", config: { configurable: { prefix: "second" } } });
  const thread = await client.threads.create();
  const first = await client.runs.wait(thread.thread_id, "agent", { input: { messages: [human("one")] } });
  t.equal((first as { messages: unknown[] }).messages.length, 2);
  const after = (await client.runs.wait(thread.thread_id, second.assistant_id, { input: { messages: [human("two")] } })) as {
    messages: { type: string; content: string }[];
  };
  t.same(
    after.messages.map((m) => m.content),
    ["one", "You said: one", "two", "second: two"],
    "the second assistant saw the first one's messages",
  );
  const state = await client.threads.getState<{ messages: unknown[] }>(thread.thread_id);
  t.equal(state.values.messages.length, 4);
  const history = await client.threads.getHistory(thread.thread_id, { limit: 100 });
  t.ok(history.length >= 4, "checkpoints of both runs are in the thread's history");
});

t.test("state updates are refused with 409 while a run is pending or running", async (t) => {
  const srv = await startTestServer();
  t.teardown(() => srv.close());
  const { client } = srv;
  const thread = await client.threads.create({ graphId: "delay" });
  const run = await client.runs.create(thread.thread_id, "delay", { input: { delay: 60_000 } });
  const res = await fetch(`${srv.url}/threads/${thread.thread_id}/state`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ values: {} }),
  });
  t.equal(res.status, 409);
  t.match(((await res.json()) as { detail: string }).detail, /busy/);
  await client.runs.cancel(thread.thread_id, run.run_id, true);
  t.equal((await client.threads.get(thread.thread_id)).status, "idle");
});
