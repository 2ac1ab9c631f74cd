/**
 * Custom auth on A2A tasks, with the JWT auth file of test/auth (every user owns what they create
 * and sees only that): a task is a run and its context a thread, so reading, cancelling, listing,
 * sending on a context and the push configs follow the `threads` handler as the REST routes do.
 */
import path from "node:path";
import { fileURLToPath } from "node:url";
import t from "tap";
import { startTestServer } from "../support/server.js";
import { rpc, textMessage } from "../support/a2a.js";
import { signToken } from "../auth/jwt.js";

const AUTH_PROJECT = path.join(path.join(path.dirname(fileURLToPath(import.meta.url)), ".."), "auth", "langgraph.json");
const ALL_SCOPES = ["threads:read", "threads:write", "assistants:read", "assistants:write"];

const s = await startTestServer({ env: { LANGGRAPH_JSON: AUTH_PROJECT } });
t.teardown(() => s.close());
const tokens = {
  alice: await signToken("alice", ALL_SCOPES),
  bob: await signToken("bob", ALL_SCOPES),
  reader: await signToken("reader", ["threads:read", "assistants:read"]),
};
type Who = keyof typeof tokens;
const call = (who: Who | undefined, method: string, params: unknown, assistant = "agent") =>
  rpc(s.url, assistant, { jsonrpc: "2.0", id: 1, method, params }, who ? { authorization: `Bearer ${tokens[who]}` } : {});
const v1 = (who: Who, method: string, params: unknown) =>
  rpc(s.url, "agent", { jsonrpc: "2.0", id: 1, method, params }, { authorization: `Bearer ${tokens[who]}`, "a2a-version": "1.0" });

t.test("A2A requests are authenticated", async (t) => {
  const res = await call(undefined, "message/send", { message: textMessage("hi") });
  t.equal(res.status, 401);
  t.same(res.json, { detail: "Missing bearer token" });
});

t.test("a task is its owner's: others get -32001 for get, cancel, resubscribe, push configs and follow-ups", async (t) => {
  const task = (await call("alice", "message/send", { message: textMessage("mine") })).json.result;
  t.equal(task.status.state, "completed");
  // The handler's metadata is on the run and the thread made for the context, as with POST /threads/{id}/runs.
  const run = await fetch(`${s.url}/threads/${task.contextId}/runs/${task.id}`, { headers: { authorization: `Bearer ${tokens.alice}` } });
  t.match(await run.json(), { metadata: { owner: "alice" } });
  t.equal((await call("alice", "tasks/get", { id: task.id })).json.result.id, task.id);
  for (const [method, params] of [
    ["tasks/get", { id: task.id }],
    ["tasks/cancel", { id: task.id }],
    ["tasks/pushNotificationConfig/list", { id: task.id }],
    ["tasks/pushNotificationConfig/get", { id: task.id }],
    ["tasks/pushNotificationConfig/delete", { id: task.id, pushNotificationConfigId: "x" }],
  ] as const) {
    const res = await call("bob", method, params);
    t.equal(res.json.error?.code, -32001, `bob: ${method}`);
  }
  const resubscribe = await call("bob", "tasks/resubscribe", { id: task.id });
  t.equal(resubscribe.events[0].error.code, -32001, "bob: tasks/resubscribe");
  // Sending on alice's context: the thread is hidden (-32602, as an unknown context is); on her task: -32001.
  const onContext = await call("bob", "message/send", { message: textMessage("hi", { contextId: task.contextId }) });
  t.equal(onContext.json.error.code, -32602);
  t.match(onContext.json.error.message, /not found/);
  const interrupt = await call("alice", "message/send", { message: textMessage("x", { taskId: task.id }) });
  t.equal(interrupt.json.error.code, -32004, "alice's own follow-up reaches her (terminal) task");
  const onTask = await call("bob", "message/send", { message: textMessage("x", { taskId: task.id }) });
  t.equal(onTask.json.error.code, -32001, "bob's follow-up on alice's task");
});

t.test("ListTasks lists only what the user may see", async (t) => {
  const mine = (await call("bob", "message/send", { message: textMessage("bob's") })).json.result;
  await call("alice", "message/send", { message: textMessage("alice's") });
  const bobs = (await v1("bob", "ListTasks", {})).json.result;
  // Bob's only task so far (his tries on alice's context and task above made none).
  t.same(
    bobs.tasks.map((x: { id: string }) => x.id),
    [mine.id],
  );
  t.equal(bobs.totalSize, 1, "the count is of bob's tasks only");
  const alices = (await v1("alice", "ListTasks", {})).json.result;
  t.ok(alices.totalSize >= 2);
  t.notOk(
    alices.tasks.some((x: { id: string }) => x.id === mine.id),
    "alice does not see bob's task",
  );
  const filtered = (await v1("alice", "ListTasks", { status: "TASK_STATE_COMPLETED" })).json.result;
  t.notOk(
    filtered.tasks.some((x: { id: string }) => x.id === mine.id),
    "the filtered scan too",
  );
});

t.test("a handler's refusal is the request's error; the graph sees the user", async (t) => {
  const refused = await call("reader", "message/send", { message: textMessage("write?") });
  t.equal(refused.json.error.code, -32600);
  t.match(refused.json.error.message, /Missing scope threads:write/);
  const who = (await call("alice", "message/send", { message: textMessage("who am i") }, "whoami")).json.result;
  const seen = JSON.parse(who.artifacts[0].parts[0].text);
  t.equal(seen.user_id, "alice", "langgraph_auth_user_id reaches the graph");
});
