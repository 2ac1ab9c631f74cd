import t from "tap";
import path from "node:path";
import { repoRoot, startTestServer } from "../support/server.js";

/** Edge behaviours as the official servers have them: state updates on interrupted threads, rollback, subgraph state shapes. */

const PARITY = path.join(repoRoot, "test", "graphs", "parity", "langgraph.json");
const human = (content: string) => ({ role: "human", content });

t.test("edge behaviours", async (t) => {
  const srv = await startTestServer({ env: { LANGGRAPH_JSON: PARITY } });
  t.teardown(() => srv.close());
  const client = srv.client;

  t.test("POST /state on an interrupted thread whose next tasks remain keeps it interrupted", async (t) => {
    const thread = await client.threads.create();
    await client.runs.wait(thread.thread_id, "interrupt", { input: { messages: [human("go")] } });
    t.equal((await client.threads.get(thread.thread_id)).status, "interrupted");
    await client.threads.updateState(thread.thread_id, { values: { messages: [human("edited")] } });
    const state = await client.threads.getState(thread.thread_id);
    t.same(state.next, ["ask"], "the interrupted node still has to run");
    t.equal((await client.threads.get(thread.thread_id)).status, "interrupted");
    // Resuming it completes the thread.
    const values = (await client.runs.wait(thread.thread_id, "interrupt", { command: { resume: "yes" } })) as { messages: { content: string }[] };
    t.equal(values.messages.at(-1)?.content, "You answered: yes");
    t.equal((await client.threads.get(thread.thread_id)).status, "idle");
  });

  t.test("POST /state that leaves nothing to run makes an interrupted thread idle; an idle thread stays idle", async (t) => {
    const thread = await client.threads.create();
    await client.runs.wait(thread.thread_id, "interrupt", { input: { messages: [human("go")] } });
    await client.threads.updateState(thread.thread_id, { values: { messages: [human("answered by hand")] }, asNode: "ask" });
    t.same((await client.threads.getState(thread.thread_id)).next, []);
    t.equal((await client.threads.get(thread.thread_id)).status, "idle");

    const idle = await client.threads.create();
    await client.runs.wait(idle.thread_id, "agent", { input: { messages: [human("hi")] } });
    await client.threads.updateState(idle.thread_id, { values: { messages: [human("more")] } });
    t.equal((await client.threads.get(idle.thread_id)).status, "idle");
  });

  t.test("multitask rollback: the rolled-back run is deleted (GET gives 404), pending or running", async (t) => {
    const thread = await client.threads.create();
    const slow = await client.runs.create(thread.thread_id, "delay", { input: { delay: 60_000, messages: [human("first")] } });
    const queued = await client.runs.create(thread.thread_id, "agent", { input: { messages: [human("second")] }, multitaskStrategy: "enqueue" });
    const winner = await client.runs.create(thread.thread_id, "agent", { input: { messages: [human("third")] }, multitaskStrategy: "rollback" });
    await client.runs.join(thread.thread_id, winner.run_id);
    for (const gone of [slow, queued]) await t.rejects(client.runs.get(thread.thread_id, gone.run_id), /404/, `${gone.run_id} is gone`);
    const runs = await client.runs.list(thread.thread_id);
    t.same(
      runs.map((r) => r.run_id),
      [winner.run_id],
    );
    const history = await client.threads.getHistory(thread.thread_id, { limit: 100 });
    t.notOk(
      history.some((s) => s.metadata?.run_id === slow.run_id || s.metadata?.run_id === queued.run_id),
      "their checkpoints are gone",
    );
  });

  t.test("subgraph state: {thread_id, checkpoint_ns} for a subgraph task, the nested state with subgraphs=true", async (t) => {
    const thread = await client.threads.create();
    await client.runs.wait(thread.thread_id, "nested_interrupt", { input: {} });
    t.equal((await client.threads.get(thread.thread_id)).status, "interrupted");

    const state = await client.threads.getState(thread.thread_id);
    t.same(state.next, ["child"]);
    t.equal(state.tasks.length, 1);
    const [task] = state.tasks;
    t.same(Object.keys(task.checkpoint ?? {}).sort(), ["checkpoint_ns", "thread_id"], "the official task checkpoint shape");
    t.match(task.checkpoint, { thread_id: thread.thread_id, checkpoint_ns: /^child:/ });
    t.equal(task.state, null);
    t.match(task.interrupts, [{ value: { question: "Which city?" }, id: String }], "the subgraph's interrupt is on the parent task");
    t.same(Object.keys(task).sort(), ["checkpoint", "error", "id", "interrupts", "name", "path", "result", "state"]);

    const recursive = await client.threads.getState(thread.thread_id, undefined, { subgraphs: true });
    const [outer] = recursive.tasks;
    t.equal(outer.checkpoint, null, "with subgraphs=true the nested state replaces the checkpoint");
    const inner = outer.state as {
      next: string[];
      tasks: { name: string; interrupts: { value: unknown }[]; checkpoint: unknown; state: unknown }[];
      checkpoint: { checkpoint_ns: string };
    };
    t.same(inner.next, ["ask"]);
    t.match(inner.checkpoint.checkpoint_ns, /^child:/);
    t.match(inner.tasks, [{ name: "ask", interrupts: [{ value: { question: "Which city?" } }], checkpoint: null, state: null }]);
    // The nested state has the official JS shape (its interrupts are on its tasks); the thread's own
    // state keeps the Python server's top-level `interrupts`.
    t.same(Object.keys(inner).sort(), ["checkpoint", "created_at", "metadata", "next", "parent_checkpoint", "tasks", "values"]);
    t.match((recursive as unknown as { interrupts: unknown }).interrupts, [{ value: { question: "Which city?" } }]);

    const thr = await client.threads.get(thread.thread_id);
    t.match(thr.interrupts, { [task.id]: [{ value: { question: "Which city?" } }] }, "thread interrupts keyed by the parent task");

    // The task's checkpoint reads the subgraph's own state.
    const innerState = await client.threads.getState(thread.thread_id, task.checkpoint ?? undefined);
    t.same(innerState.next, ["ask"]);

    const done = (await client.runs.wait(thread.thread_id, "nested_interrupt", { command: { resume: "Paris" } })) as { city: string; done: boolean };
    t.same(done, { city: "Paris", done: true });
    t.equal((await client.threads.get(thread.thread_id)).status, "idle");
  });
});
