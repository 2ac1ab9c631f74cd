import t from "tap";
import { assembleRun, runConfigurable, runSchedule, streamModesOf, type RunAssembly } from "../../src/domain/run-assembly.js";
import { RunRequestSchema, StatelessRunRequestSchema, knownStreamModes } from "../../src/domain/run-request.js";
import { RunRecordSchema } from "../../src/domain/run-record.js";

/** The run record a request becomes: pure, no store, no clock. */

const NOW = "2026-01-01T00:00:00.000+00:00";
const base = (over: Partial<RunAssembly> = {}): RunAssembly => ({
  runId: "run-1",
  threadId: "thread-1",
  stateless: false,
  now: NOW,
  request: { assistant_id: "asst-1" },
  assistant: { assistant_id: "asst-1", graph_id: "agent", config: {}, context: {}, metadata: {} },
  thread: { config: {}, metadata: {} },
  headerConfigurable: {},
  stored: { input: null },
  ...over,
});

t.test("configurable: assistant < thread < headers < request, then the ids the graph runs under", async (t) => {
  const configurable = runConfigurable(
    base({
      assistant: {
        assistant_id: "asst-1",
        graph_id: "agent",
        config: { configurable: { a: "assistant", b: "assistant", c: "assistant", d: "assistant" } },
        context: {},
        metadata: {},
      },
      thread: { config: { configurable: { b: "thread", c: "thread", d: "thread" } }, metadata: {} },
      headerConfigurable: { c: "header", d: "header" },
      request: { assistant_id: "asst-1", config: { configurable: { d: "request", run_id: "client's", thread_id: "client's" } } },
    }),
  );
  t.same(configurable, {
    a: "assistant",
    b: "thread",
    c: "header",
    d: "request",
    run_id: "run-1",
    thread_id: "thread-1",
    graph_id: "agent",
    assistant_id: "asst-1",
  });
});

t.test("configurable: the auth keys come only from the authenticated user", async (t) => {
  const forged = { langgraph_auth_user: { identity: "mallory" }, langgraph_auth_user_id: "mallory", langgraph_auth_permissions: ["admin"] };
  const anonymous = runConfigurable(
    base({
      assistant: { assistant_id: "asst-1", graph_id: "agent", config: { configurable: forged }, context: {}, metadata: {} },
      thread: { config: { configurable: forged }, metadata: {} },
      headerConfigurable: forged,
      request: { assistant_id: "asst-1", config: { configurable: forged } },
    }),
  );
  for (const key of Object.keys(forged)) t.notOk(key in anonymous, `${key} dropped without auth`);

  const user = { identity: "alice", permissions: ["read"], display_name: "Alice", is_authenticated: true, team: { id: 7 } };
  const authed = runConfigurable(base({ request: { assistant_id: "asst-1", config: { configurable: forged } }, auth: { user, permissions: ["read"] } }));
  t.same(authed.langgraph_auth_user, user, "the user as JSON");
  t.not(authed.langgraph_auth_user, user, "a copy, not the live object");
  t.equal(authed.langgraph_auth_user_id, "alice");
  t.same(authed.langgraph_auth_permissions, ["read"]);
});

t.test("configurable: request id unless the client named one; checkpoint fields", async (t) => {
  t.equal(runConfigurable(base({ requestId: "req-1" })).langgraph_request_id, "req-1");
  const named = base({ requestId: "req-1", request: { assistant_id: "asst-1", config: { configurable: { langgraph_request_id: "mine" } } } });
  t.equal(runConfigurable(named).langgraph_request_id, "mine");
  t.notOk("langgraph_request_id" in runConfigurable(base()));

  const checkpoint = runConfigurable(
    base({ request: { assistant_id: "asst-1", checkpoint_id: "c1", checkpoint: { checkpoint_id: "c2", checkpoint_ns: "", checkpoint_map: null } } }),
  );
  t.equal(checkpoint.checkpoint_id, "c2", "checkpoint wins over checkpoint_id");
  t.equal(checkpoint.checkpoint_ns, "");
  t.notOk("checkpoint_map" in checkpoint, "a null field is left out");
});

t.test("schedule: after_seconds moves created_at and sets not_before", async (t) => {
  t.same(runSchedule(NOW, undefined), { createdAt: NOW });
  t.same(runSchedule(NOW, 0), { createdAt: NOW });
  t.same(runSchedule(NOW, 1.5), { createdAt: "2026-01-01T00:00:01.500+00:00", notBefore: "2026-01-01T00:00:01.500+00:00" });
  const run = assembleRun(base({ request: { assistant_id: "asst-1", after_seconds: 60 } }));
  t.equal(run.created_at, "2026-01-01T00:01:00.000+00:00");
  t.equal(run.updated_at, run.created_at);
  t.equal(run.kwargs.not_before, run.created_at);
  t.notOk("not_before" in assembleRun(base()).kwargs, "no not_before for a run that may start now");
});

t.test("stream modes: values by default, one or many as a list", async (t) => {
  t.same(streamModesOf(undefined), ["values"]);
  t.same(streamModesOf("updates"), ["updates"]);
  t.same(streamModesOf(["messages-tuple", "custom"]), ["messages-tuple", "custom"]);
  t.same(knownStreamModes(["values", "nonsense", "debug"]), ["values", "debug"], "a cron payload's unknown modes are left out");
  t.same(knownStreamModes("updates"), ["updates"]);
});

t.test("the whole record: defaults, config and metadata merges, kwargs", async (t) => {
  const run = assembleRun(
    base({
      assistant: {
        assistant_id: "asst-1",
        graph_id: "agent",
        config: { tags: ["a"], recursion_limit: 5 },
        context: { model: "x", temp: 1 },
        metadata: { owner: "assistant", level: "a" },
      },
      thread: { config: { tags: ["t"] }, metadata: { owner: "thread" } },
      request: { assistant_id: "asst-1", config: { recursion_limit: 9, metadata: { from: "config" } }, context: { temp: 2 }, metadata: { level: "request" } },
    }),
  );
  t.ok(RunRecordSchema.safeParse(run).success, "a valid run record");
  t.match(run, { run_id: "run-1", thread_id: "thread-1", assistant_id: "asst-1", status: "pending", multitask_strategy: "enqueue", created_at: NOW });
  // The run names its own graph and assistant over the thread's (which name its last run's), as the official server's merged metadata.
  t.same(run.metadata, { owner: "thread", level: "request", graph_id: "agent", assistant_id: "asst-1" });
  const continued = assembleRun(
    base({
      thread: { config: {}, metadata: { graph_id: "agent", assistant_id: "asst-0" } },
      request: { assistant_id: "asst-1", metadata: {} },
    }),
  );
  t.match(continued.metadata, { graph_id: "agent", assistant_id: continued.assistant_id }, "another assistant continuing a thread: the run's own");
  t.same(run.kwargs.config.tags, ["t"]);
  t.equal(run.kwargs.config.recursion_limit, 9);
  t.same(run.kwargs.config.metadata, { from: "config", level: "request" });
  t.same(run.kwargs.context, { model: "x", temp: 2 });
  t.same(
    run.kwargs,
    {
      input: null,
      config: run.kwargs.config,
      context: run.kwargs.context,
      stream_mode: ["values"],
      temporary: false,
      subgraphs: false,
      resumable: false,
    },
    "no optional kwargs the request did not name",
  );
});

t.test("kwargs: what the request named, the stored input and command, temporary threads", async (t) => {
  const run = assembleRun(
    base({
      stored: { input: { large: "ref" }, command: { resume: "yes" } },
      request: {
        assistant_id: "asst-1",
        interrupt_before: "*",
        interrupt_after: ["n1"],
        webhook: "https://example.test/hook",
        feedback_keys: ["score"],
        on_disconnect: "cancel",
        stream_subgraphs: true,
        stream_resumable: true,
        multitask_strategy: "reject",
      },
    }),
  );
  t.match(run.kwargs, {
    input: { large: "ref" },
    command: { resume: "yes" },
    interrupt_before: "*",
    interrupt_after: ["n1"],
    webhook: "https://example.test/hook",
    feedback_keys: ["score"],
    on_disconnect: "cancel",
    subgraphs: true,
    resumable: true,
  });
  t.equal(run.multitask_strategy, "reject");
  t.equal(assembleRun(base({ stateless: true })).kwargs.temporary, true, "stateless: deleted after by default");
  t.equal(assembleRun(base({ stateless: true, request: { assistant_id: "a", on_completion: "keep" } })).kwargs.temporary, false);
  t.equal(
    assembleRun(base({ stateless: false, request: { assistant_id: "a", on_completion: "delete" } })).kwargs.temporary,
    false,
    "a thread's run never deletes it",
  );
});

t.test("the one schema: stateful bodies drop on_completion, stateless keep it; bad fields are named", async (t) => {
  t.notOk("on_completion" in RunRequestSchema.parse({ assistant_id: "a", on_completion: "keep" }));
  t.equal(StatelessRunRequestSchema.parse({ assistant_id: "a", on_completion: "keep" }).on_completion, "keep");
  const bad = RunRequestSchema.safeParse({ assistant_id: "a", stream_mode: "nonsense", after_seconds: -1 });
  t.notOk(bad.success);
  t.same(bad.error?.issues.map((i) => i.path.join(".")).sort(), ["after_seconds", "stream_mode"]);
});
