import t from "tap";
import { expectErrors } from "../support/http.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { firstEventOf } from "../support/log.js";
import { gates } from "../support/gates.js";
import { runStream } from "../../src/domain/runs.js";
import { threadStream } from "../../src/domain/threads.js";

/** Runs through the official SDK against the real server: wait, create + join, cancel, double-texting, interrupts, stateless. */

const human = (content: string) => ({ role: "user", content });
type Msg = { type: string; content: string };
const contents = (values: unknown) => ((values as { messages?: Msg[] }).messages ?? []).map((m) => m.content);

/** Resolves once the run has been claimed (its stream shows the `metadata` event), without sleeping. */
async function running(srv: TestServer, threadId: string, runId: string): Promise<void> {
  for await (const part of srv.client.runs.joinStream(threadId, runId, { lastEventId: "-1" })) {
    if (part.event === "metadata") return;
  }
}

t.test("runs lifecycle", async (t) => {
  const srv = await startTestServer();
  t.teardown(() => srv.close());
  const { client } = srv;

  t.test("wait returns the final values; the run and thread show the outcome", async (t) => {
    const thread = await client.threads.create();
    const values = await client.runs.wait(thread.thread_id, "agent", { input: { messages: [human("hi")] } });
    t.same(contents(values), ["hi", "You said: hi"]);
    const [run] = await client.runs.list(thread.thread_id);
    t.equal(run.status, "success");
    t.equal(run.multitask_strategy, "enqueue", "PY default strategy");
    const kw = (run as unknown as { kwargs: unknown }).kwargs as { config: { configurable: Record<string, unknown> }; stream_mode: string[] };
    t.match(kw.config.configurable, { run_id: run.run_id, thread_id: thread.thread_id, graph_id: "agent", assistant_id: run.assistant_id });
    t.same(kw.stream_mode, ["values"]);
    const after = await client.threads.get(thread.thread_id);
    t.equal(after.status, "idle");
    t.same(contents(after.values), ["hi", "You said: hi"]);
    t.match(after.metadata, { graph_id: "agent", assistant_id: run.assistant_id });
    t.same(await client.runs.get(thread.thread_id, run.run_id), run);
  });

  t.test("a second run continues the thread's state; both prefixes serve the runs", async (t) => {
    const thread = await client.threads.create();
    await client.runs.wait(thread.thread_id, "agent", { input: { messages: [human("one")] } });
    const res = await fetch(`${srv.url}/thread/${thread.thread_id}/runs/wait`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ assistant_id: "agent", input: { messages: [human("two")] } }),
    });
    t.equal(res.status, 200);
    t.match(res.headers.get("content-location"), `/threads/${thread.thread_id}/runs/`);
    t.match(res.headers.get("location"), /\/join$/);
    t.same(contents(await res.json()), ["one", "You said: one", "two", "You said: two"]);
    const list = (await (await fetch(`${srv.url}/thread/${thread.thread_id}/runs?limit=1`)).json()) as unknown[];
    t.equal(list.length, 1, "limit");
    const selected = await client.runs.list(thread.thread_id, { select: ["run_id", "status"] });
    t.same(
      selected.map((r) => Object.keys(r).sort()),
      [
        ["run_id", "status"],
        ["run_id", "status"],
      ],
      "select",
    );
    t.equal((await client.runs.list(thread.thread_id, { offset: 1 })).length, 1, "offset");
  });

  t.test("errors: __error__ body, error status, thread error; SDK throws", async (t) => {
    const thread = await client.threads.create();
    const body = await client.runs.wait(thread.thread_id, "error", { input: { messages: [human("x")] }, raiseError: false });
    t.same(body, { __error__: { error: "CustomError", message: "Boo!" } });
    await t.rejects(client.runs.wait(thread.thread_id, "error", { input: { messages: [human("x")] } }), /CustomError: Boo!/);
    const runs = await client.runs.list(thread.thread_id);
    t.same(
      runs.map((r) => r.status),
      ["error", "error"],
    );
    t.same((await client.runs.list(thread.thread_id, { status: "success" })).length, 0, "status filter");
    t.equal((await client.threads.get(thread.thread_id)).status, "error");
  });

  t.test("404 and 422", async (t) => {
    const thread = await client.threads.create();
    const runs = `/threads/${thread.thread_id}/runs`;
    await expectErrors(t, srv.url, [
      ["POST", runs, { assistant_id: "nope" }, 404, /No assistant found/],
      ["POST", runs, { assistant_id: "00000000-0000-4000-8000-000000000000" }, 404, /assistant/i],
      ["POST", "/threads/00000000-0000-4000-8000-000000000001/runs", { assistant_id: "agent" }, 404, /not found/i],
      ["POST", runs, { assistant_id: "agent", stream_mode: ["nope"] }, 422, /^body\.stream_mode/],
      ["POST", runs, { assistant_id: "agent", multitask_strategy: "later" }, 422, /^body\.multitask_strategy: /],
      ["POST", runs, { input: {} }, 422, /assistant_id/],
      ["POST", runs, { assistant_id: 7 }, 422, /assistant_id/],
      ["POST", runs, { assistant_id: "agent", after_seconds: "soon" }, 422, /after_seconds/],
      ["POST", runs, { assistant_id: "agent", config: [] }, 422, /config/],
      ["POST", `${runs}/wait`, { assistant_id: "agent", if_not_exists: "maybe" }, 422, /if_not_exists/],
      ["POST", "/runs/wait", { assistant_id: "agent", on_completion: "never" }, 422, /on_completion/],
      ["POST", "/runs/batch", [], 422, /body/],
      ["POST", "/threads/not-a-uuid/runs", { assistant_id: "agent" }, 422, /thread_id/],
      ["GET", `${runs}/00000000-0000-4000-8000-000000000002`, undefined, 404, /^Run not found$/],
      ["POST", `${runs}/00000000-0000-4000-8000-000000000002/cancel`, undefined, 404, /not found/i],
    ]);
    t.same(await client.runs.list(thread.thread_id), [], "rejected requests created no run");
  });

  t.test("if_not_exists=create makes the thread", async (t) => {
    const id = "7e1d9c3a-0c0e-4f7b-9d55-6a0f4b2a1c01";
    const values = await client.runs.wait(id, "agent", { input: { messages: [human("new")] }, ifNotExists: "create" });
    t.same(contents(values), ["new", "You said: new"]);
    t.equal((await client.threads.get(id)).status, "idle");
  });

  t.test("create + join; delete a finished run", async (t) => {
    const thread = await client.threads.create();
    const run = await client.runs.create(thread.thread_id, "agent", { input: { messages: [human("bg")] } });
    t.equal(run.status, "pending");
    t.same(contents(await client.runs.join(thread.thread_id, run.run_id)), ["bg", "You said: bg"]);
    t.equal((await client.runs.get(thread.thread_id, run.run_id)).status, "success");
    await client.runs.delete(thread.thread_id, run.run_id);
    await t.rejects(client.runs.get(thread.thread_id, run.run_id), /404/);
  });

  t.test("cancel aborts a running graph (interrupt), and a pending run", async (t) => {
    const thread = await client.threads.create();
    const slow = await client.runs.create(thread.thread_id, "delay", { input: { delay: 60_000 } });
    const queued = await client.runs.create(thread.thread_id, "delay", { input: { delay: 1 } });
    await running(srv, thread.thread_id, slow.run_id);
    t.equal((await client.runs.get(thread.thread_id, queued.run_id)).status, "pending", "enqueued behind the running one");
    await client.runs.cancel(thread.thread_id, queued.run_id);
    t.equal((await client.runs.get(thread.thread_id, queued.run_id)).status, "interrupted");
    const started = Date.now();
    await client.runs.cancel(thread.thread_id, slow.run_id, true);
    t.ok(Date.now() - started < 10_000, "the graph was aborted, not waited for");
    t.equal((await client.runs.get(thread.thread_id, slow.run_id)).status, "interrupted");
    t.equal((await client.threads.get(thread.thread_id)).status, "idle");
    const res = await fetch(`${srv.url}/threads/${thread.thread_id}/runs/${slow.run_id}/cancel`, { method: "POST" });
    t.equal(res.status, 202, "cancelling an ended run is accepted and changes nothing");
  });

  t.test("multitask: reject → 409 while busy", async (t) => {
    const thread = await client.threads.create();
    const slow = await client.runs.create(thread.thread_id, "delay", { input: { delay: 60_000 } });
    await t.rejects(client.runs.create(thread.thread_id, "agent", { input: { messages: [human("x")] }, multitaskStrategy: "reject" }), /409/);
    await client.runs.cancel(thread.thread_id, slow.run_id, true);
  });

  t.test("multitask: enqueue runs one after the other (FIFO)", async (t) => {
    const thread = await client.threads.create();
    const first = await client.runs.create(thread.thread_id, "delay", { input: { delay: 50, messages: [human("a")] } });
    const second = await client.runs.create(thread.thread_id, "delay", { input: { delay: 1, messages: [human("b")] }, multitaskStrategy: "enqueue" });
    const third = await client.runs.create(thread.thread_id, "delay", { input: { delay: 1, messages: [human("c")] } });
    const values = await client.runs.join(thread.thread_id, third.run_id);
    t.same(contents(values), ["a", "waited 50ms", "b", "waited 1ms", "c", "waited 1ms"]);
    for (const r of [first, second, third]) t.equal((await client.runs.get(thread.thread_id, r.run_id)).status, "success");
  });

  t.test("multitask: interrupt ends the running run as interrupted, keeping its work", async (t) => {
    const thread = await client.threads.create();
    const slow = await client.runs.create(thread.thread_id, "delay", { input: { delay: 60_000, messages: [human("slow")] } });
    await running(srv, thread.thread_id, slow.run_id);
    const values = await client.runs.wait(thread.thread_id, "agent", { input: { messages: [human("now")] }, multitaskStrategy: "interrupt" });
    t.equal((await client.runs.get(thread.thread_id, slow.run_id)).status, "interrupted");
    t.same(contents(values), ["slow", "now", "You said: now"], "the interrupted run's input stays in the thread");
  });

  t.test("multitask: rollback removes the running run and its checkpoints", async (t) => {
    const thread = await client.threads.create();
    await client.runs.wait(thread.thread_id, "agent", { input: { messages: [human("before")] } });
    const slow = await client.runs.create(thread.thread_id, "delay", { input: { delay: 60_000, messages: [human("slow")] } });
    await running(srv, thread.thread_id, slow.run_id);
    const values = await client.runs.wait(thread.thread_id, "agent", { input: { messages: [human("after")] }, multitaskStrategy: "rollback" });
    t.same(contents(values), ["before", "You said: before", "after", "You said: after"], "no trace of the rolled back run");
    await t.rejects(client.runs.get(thread.thread_id, slow.run_id), /404/, "the run is deleted");
    t.equal((await client.runs.list(thread.thread_id)).length, 2);
    const history = await client.threads.getHistory(thread.thread_id, { limit: 100 });
    t.notOk(
      history.some((s) => (s.metadata as Record<string, unknown> | null)?.run_id === slow.run_id),
      "its checkpoints are gone",
    );
  });

  t.test("human in the loop: interrupt() then resume with a command", async (t) => {
    const thread = await client.threads.create();
    const first = await client.runs.wait(thread.thread_id, "interrupt", { input: { messages: [human("go")] } });
    t.match(first, { __interrupt__: [{ value: { question: "Continue?" } }] });
    const [run] = await client.runs.list(thread.thread_id);
    t.equal(run.status, "interrupted");
    const interrupted = await client.threads.get(thread.thread_id);
    t.equal(interrupted.status, "interrupted");
    const tasks = Object.values(interrupted.interrupts as Record<string, { id: string; value: unknown }[]>);
    t.equal(tasks.length, 1);
    t.match(tasks[0], [{ id: String, value: { question: "Continue?" } }]);
    const resumed = await client.runs.wait(thread.thread_id, "interrupt", { command: { resume: "yes" } });
    t.same(contents(resumed), ["go", "You answered: yes"]);
    const after = await client.threads.get(thread.thread_id);
    t.equal(after.status, "idle");
    t.same(after.interrupts, {});
  });

  t.test("interrupt_before stops before the node; a null input continues", async (t) => {
    const thread = await client.threads.create();
    await client.runs.wait(thread.thread_id, "agent", { input: { messages: [human("wait")] }, interruptBefore: ["agent"] });
    t.equal((await client.threads.get(thread.thread_id)).status, "interrupted");
    t.same((await client.threads.getState(thread.thread_id)).next, ["agent"]);
    const done = await client.runs.wait(thread.thread_id, "agent", { input: null });
    t.same(contents(done), ["wait", "You said: wait"]);
    t.equal((await client.threads.get(thread.thread_id)).status, "idle");
  });

  t.test("stateless: wait, on_completion delete (default) and keep, batch", async (t) => {
    const values = await client.runs.wait(null, "agent", { input: { messages: [human("s")] } });
    t.same(contents(values), ["s", "You said: s"]);
    const kept = await client.runs.create(null, "agent", { input: { messages: [human("k")] }, onCompletion: "keep" as never });
    const thread = await client.threads.get(kept.thread_id);
    t.ok(thread, "its thread exists");
    await client.runs.join(kept.thread_id, kept.run_id);
    t.same(contents((await client.threads.get(kept.thread_id)).values), ["k", "You said: k"], "kept with its state");
    // Held at a gate until its stream is open: a run that ended (and took its temporary thread along)
    // before the stream was asked for would be gone (404).
    const gate = gates(t);
    const temp = await client.runs.create(null, "delay", { input: { gate: gate.path("temp"), messages: [human("d")] } });
    const res = await fetch(`${srv.url}/runs/${temp.run_id}/stream`);
    t.equal(res.status, 200);
    gate.open("temp");
    await res.text();
    await t.rejects(client.threads.get(temp.thread_id), /404/, "temporary thread deleted after the run");
    const batch = await client.runs.createBatch([
      // The SDK's createBatch sends its payloads as they are (only assistantId is renamed): snake_case here.
      { assistantId: "agent", input: { messages: [human("b1")] }, ...({ on_completion: "keep" } as object) },
      { assistantId: "agent", input: { messages: [human("b2")] } },
    ]);
    t.equal(batch.length, 2);
    t.ok(
      batch.every((r) => r.status === "pending"),
      "answered before they run",
    );
    t.not(batch[0].thread_id, batch[1].thread_id, "each run has a thread of its own");
    t.same(
      batch.map((r) => contents((r as unknown as { kwargs: { input: unknown } }).kwargs.input)),
      [["b1"], ["b2"]],
      "in the order given",
    );
    // Both run to success with their own input, as the log records it.
    const ends = await Promise.all(batch.map((r) => firstEventOf(srv.server.store, runStream(r.run_id), ["RunEnded"])));
    t.same(
      ends.map((e) => (e.data as { status: string }).status),
      ["success", "success"],
    );
    t.same(
      ends.map((e) => contents((e.data as { values: unknown }).values)),
      [
        ["b1", "You said: b1"],
        ["b2", "You said: b2"],
      ],
    );
    // The first was kept: its thread and run show the outcome. The second's thread is deleted (the default).
    const [kept1, temp2] = batch;
    t.same(contents((await client.threads.get(kept1.thread_id)).values), ["b1", "You said: b1"]);
    t.equal((await client.runs.get(kept1.thread_id, kept1.run_id)).status, "success");
    await firstEventOf(srv.server.store, threadStream(temp2.thread_id), ["ThreadDeleted"]);
    await t.rejects(client.threads.get(temp2.thread_id), /404/, "the second run's temporary thread is gone");
  });

  t.test("after_seconds delays the start", async (t) => {
    const thread = await client.threads.create();
    const before = Date.now();
    const run = await client.runs.create(thread.thread_id, "agent", { input: { messages: [human("later")] }, afterSeconds: 0.3 });
    t.ok(Date.parse(run.created_at) >= before + 250, "created_at is shifted");
    await client.runs.join(thread.thread_id, run.run_id);
    t.ok(Date.now() - before >= 290, "did not start before its time");
  });

  t.test("POST /runs/cancel by ids and by status", async (t) => {
    const thread = await client.threads.create();
    const slow = await client.runs.create(thread.thread_id, "delay", { input: { delay: 60_000 } });
    await running(srv, thread.thread_id, slow.run_id);
    await client.runs.cancelMany({ threadId: thread.thread_id, runIds: [slow.run_id] });
    await client.runs.join(thread.thread_id, slow.run_id);
    t.equal((await client.runs.get(thread.thread_id, slow.run_id)).status, "interrupted");
    const res = await fetch(`${srv.url}/runs/cancel`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ status: "running" }),
    });
    t.equal(res.status, 404, "nothing running → 404");
  });

  t.test("checkpoint_id: a run forks the thread from an earlier checkpoint", async (t) => {
    const thread = await client.threads.create();
    await client.runs.wait(thread.thread_id, "agent", { input: { messages: [human("one")] } });
    const afterOne = await client.threads.getState(thread.thread_id);
    await client.runs.wait(thread.thread_id, "agent", { input: { messages: [human("two")] } });
    const forked = await client.runs.wait(thread.thread_id, "agent", {
      input: { messages: [human("other")] },
      checkpointId: afterOne.checkpoint.checkpoint_id!,
    });
    t.same(contents(forked), ["one", "You said: one", "other", "You said: other"]);
  });

  t.test("wait with on_disconnect=cancel: leaving cancels the run; keep-alive headers come first", async (t) => {
    const thread = await client.threads.create();
    const controller = new AbortController();
    const res = await fetch(`${srv.url}/threads/${thread.thread_id}/runs/wait`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      signal: controller.signal,
      body: JSON.stringify({ assistant_id: "delay", input: { delay: 60_000 }, on_disconnect: "cancel" }),
    });
    t.equal(res.status, 200, "headers are sent before the run ends");
    t.match(res.headers.get("content-type"), /^application\/json/);
    const runId = res.headers.get("content-location")!.split("/").pop()!;
    controller.abort();
    await client.runs.join(thread.thread_id, runId);
    t.equal((await client.runs.get(thread.thread_id, runId)).status, "interrupted");
  });
});
