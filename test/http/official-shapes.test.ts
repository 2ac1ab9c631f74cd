import t from "tap";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { startTestServer, repoRoot, type TestServer } from "../support/server.js";
import { gates } from "../support/gates.js";
import { LANGGRAPH_JS_VERSION } from "../../src/version.js";

/**
 * Answers the official SDK gets from the official Agent Server for the same script, through the real
 * server: what /wait and /join return for interrupted and cancelled runs, the order of a thread's
 * runs, and the metadata a run's checkpoints carry.
 */

const human = (content: string) => ({ role: "user", content });
type Msg = { content: string };
const contents = (values: unknown) => ((values as { messages?: Msg[] } | null)?.messages ?? []).map((m) => m.content);

/** Resolves once the run has been claimed (its stream shows the `metadata` event), without sleeping. */
async function running(srv: TestServer, threadId: string, runId: string): Promise<void> {
  for await (const part of srv.client.runs.joinStream(threadId, runId, { lastEventId: "-1" })) {
    if (part.event === "metadata") return;
  }
}

t.test("official shapes", async (t) => {
  const srv = await startTestServer();
  t.teardown(() => srv.close());
  const { client } = srv;

  t.test("wait and join on an interrupted run answer the interrupt, not the state (the last values chunk)", async (t) => {
    const thread = await client.threads.create();
    const waited = await client.runs.wait(thread.thread_id, "interrupt", { input: { messages: [human("go")] } });
    t.same(Object.keys(waited as object), ["__interrupt__"], "no state values beside it");
    t.match(waited, { __interrupt__: [{ id: String, value: { question: "Continue?" } }] });
    const [run] = await client.runs.list(thread.thread_id);
    t.same(await client.runs.join(thread.thread_id, run.run_id), waited, "join answers the same");
    t.same(contents((await client.threads.getState(thread.thread_id)).values), ["go"], "the state is still the thread's");

    const stateless = await client.runs.wait(null, "interrupt", { input: { messages: [human("s")] } });
    t.match(stateless, { __interrupt__: [{ value: { question: "Continue?" } }] });
  });

  t.test("interrupt_before and interrupt_after: an empty __interrupt__, as LangGraph emits it", async (t) => {
    const before = await client.threads.create();
    t.same(await client.runs.wait(before.thread_id, "agent", { input: { messages: [human("b")] }, interruptBefore: ["agent"] }), { __interrupt__: [] });
    t.same((await client.threads.getState(before.thread_id)).next, ["agent"]);
    const after = await client.threads.create();
    t.same(await client.runs.wait(after.thread_id, "agent", { input: { messages: [human("a")] }, interruptAfter: ["agent"] }), { __interrupt__: [] });
    const [run] = await client.runs.list(after.thread_id);
    t.same(await client.runs.join(after.thread_id, run.run_id), { __interrupt__: [] }, "join too");
    // Continued with a null input, the run's result is its state again.
    t.same(contents(await client.runs.wait(before.thread_id, "agent", { input: null })), ["b", "You said: b"]);
  });

  t.test("the checkpoints of a run name its own assistant when another assistant continues a thread", async (t) => {
    const other = await client.assistants.create({ graphId: "agent", name: "other agent" });
    const thread = await client.threads.create();
    await client.runs.wait(thread.thread_id, "agent", { input: { messages: [human("one")] } });
    const first = await client.threads.getState(thread.thread_id);
    t.not((first.metadata as Record<string, unknown>).assistant_id, other.assistant_id);
    await client.runs.wait(thread.thread_id, other.assistant_id, { input: { messages: [human("two")] } });
    const runs = await client.runs.list(thread.thread_id);
    const second = runs.find((r) => r.assistant_id === other.assistant_id)!;
    t.match(second.metadata, { assistant_id: other.assistant_id, graph_id: "agent" }, "the run's metadata names its assistant");
    const history = await client.threads.getHistory(thread.thread_id, { limit: 100 });
    const written = history.filter((s) => (s.metadata as Record<string, unknown> | null)?.run_id === second.run_id);
    t.ok(written.length > 0, "the second run wrote checkpoints");
    for (const s of written) t.equal((s.metadata as Record<string, unknown>).assistant_id, other.assistant_id);
    t.equal((await client.threads.get(thread.thread_id)).metadata?.assistant_id, other.assistant_id, "and so does the thread");
  });

  t.test("join on a cancelled run: the state it stopped at, as the Python server (the JS dev server answers null)", async (t) => {
    const gate = gates(t);
    const thread = await client.threads.create();
    await client.runs.wait(thread.thread_id, "agent", { input: { messages: [human("before")] } });
    const slow = await client.runs.create(thread.thread_id, "delay", { input: { gate: gate.path("never"), messages: [human("slow")] } });
    await running(srv, thread.thread_id, slow.run_id);
    await client.runs.cancel(thread.thread_id, slow.run_id, true);
    t.equal((await client.runs.get(thread.thread_id, slow.run_id)).status, "interrupted");
    const joined = await client.runs.join(thread.thread_id, slow.run_id);
    t.same(contents(joined), ["before", "You said: before", "slow"], "the thread's state when the run stopped");

    // Cancelled before it started, a run has no state of its own: the thread's values, as Python's join falls back to.
    const pending = await client.runs.create(thread.thread_id, "agent", { input: { messages: [human("later")] }, afterSeconds: 3600 });
    await client.runs.cancel(thread.thread_id, pending.run_id);
    t.same(contents(await client.runs.join(thread.thread_id, pending.run_id)), ["before", "You said: before", "slow"]);
    const fresh = await client.threads.create();
    const never = await client.runs.create(fresh.thread_id, "agent", { input: { messages: [human("x")] }, afterSeconds: 3600 });
    await client.runs.cancel(fresh.thread_id, never.run_id);
    t.equal(await client.runs.join(fresh.thread_id, never.run_id), null, "a thread without values: null, as both servers");
  });

  t.test("runs.list: created_at descending (Python's order), ties newest first", async (t) => {
    const thread = await client.threads.create();
    const delayed = await client.runs.create(thread.thread_id, "agent", { input: { messages: [human("d")] }, afterSeconds: 3600 });
    const made = [];
    for (let i = 0; i < 4; i++) made.push(await client.runs.create(thread.thread_id, "agent", { input: { messages: [human(`r${i}`)] } }));
    const listed = await client.runs.list(thread.thread_id, { limit: 100 });
    t.same(
      listed.map((r) => r.run_id),
      [delayed, ...made.reverse()].map((r) => r.run_id),
      "the delayed run is created when it may start: first",
    );
    const key = (r: { created_at: string; run_id: string }) => `${r.created_at} ${r.run_id}`;
    t.same(listed.map(key), listed.map(key).sort().reverse(), "created_at desc, then run id desc");
    t.same(
      (await client.runs.list(thread.thread_id, { limit: 2, offset: 1 })).map((r) => r.run_id),
      listed.slice(1, 3).map((r) => r.run_id),
      "pages follow the order",
    );
    await client.runs.cancel(thread.thread_id, delayed.run_id);
  });

  t.test("checkpoint metadata: what the official server adds when it executes a run", async (t) => {
    const thread = await client.threads.create();
    await client.runs.wait(thread.thread_id, "agent", { input: { messages: [human("m")] }, metadata: { mine: 1 } });
    const state = await client.threads.getState(thread.thread_id);
    const metadata = state.metadata as Record<string, unknown>;
    t.match(metadata, {
      run_attempt: 1,
      langgraph_version: LANGGRAPH_JS_VERSION,
      langgraph_host: "self-hosted",
      mine: 1,
      assistant_id: String,
      graph_id: "agent",
    });
    t.notOk("langgraph_plan" in metadata, "no plan: this server runs under none");
    t.notOk("langgraph_api_url" in metadata, "no URL unless LANGGRAPH_API_URL names one");
    t.notOk("user-agent" in metadata, "request headers reach a run only through http.configurable_headers");
  });
});

t.test("LANGGRAPH_API_URL is the langgraph_api_url of runs' checkpoints", async (t) => {
  const before = process.env.LANGGRAPH_API_URL;
  process.env.LANGGRAPH_API_URL = "https://agents.example.test";
  t.teardown(() => {
    if (before === undefined) delete process.env.LANGGRAPH_API_URL;
    else process.env.LANGGRAPH_API_URL = before;
  });
  const srv = await startTestServer();
  t.teardown(() => srv.close());
  const thread = await srv.client.threads.create();
  await srv.client.runs.wait(thread.thread_id, "agent", { input: { messages: [human("u")] } });
  t.match((await srv.client.threads.getState(thread.thread_id)).metadata, { langgraph_api_url: "https://agents.example.test" });
});

t.test("a step where one task interrupts and another writes answers the state with that write (LangGraph's last values chunk)", async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), "official-shapes-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const config = path.join(dir, "langgraph.json");
  await writeFile(config, JSON.stringify({ graphs: { parallel: `${path.join(repoRoot, "test", "graphs", "parallel-interrupt.ts")}:graph` } }));
  const srv = await startTestServer({ env: { LANGGRAPH_JSON: config } });
  t.teardown(() => srv.close());
  const thread = await srv.client.threads.create();
  const waited = await srv.client.runs.wait(thread.thread_id, "parallel", { input: { topic: "t" } });
  t.same(waited, { topic: "t", note: "noted" });
  t.equal((await srv.client.threads.get(thread.thread_id)).status, "interrupted");
  const resumed = await srv.client.runs.wait(thread.thread_id, "parallel", { command: { resume: "yes" } });
  t.same(resumed, { topic: "t", note: "noted", answer: "yes" });
});
