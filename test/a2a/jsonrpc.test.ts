/**
 * The A2A endpoint through raw JSON-RPC on a real server: every error code, malformed bodies,
 * version selection, the agent card (public URL, proxies, API key), parts, and the v1.0 shapes.
 */
import t from "tap";
import type { AgentCard } from "@a2a-js/sdk";
import { startA2AServer, rpc, textMessage } from "../support/a2a.js";
import { defaultAssistantId } from "../../src/runtime/graphs.js";
import { protobufTimestamp } from "../../src/a2a/codec.js";

const s = await startA2AServer();
t.teardown(() => s.close());
const url = s.url;

/** The agent card's fields these tests read: its v0.3 ones, its v1.0 interfaces, and the skill's input schema. */
interface Card extends Pick<
  AgentCard,
  "protocolVersion" | "name" | "description" | "url" | "preferredTransport" | "capabilities" | "defaultInputModes" | "securitySchemes" | "security"
> {
  supportedInterfaces: { url: string; protocolBinding: string; protocolVersion: string }[];
  skills: { id: string; metadata: { inputSchema: { supportsA2A: boolean } } }[];
}

const send = (text: string, extra: Record<string, unknown> = {}) => ({
  jsonrpc: "2.0",
  id: "s1",
  method: "message/send",
  params: { message: textMessage(text), ...extra },
});

t.test("malformed envelopes: every response echoes the id it could read", async (t) => {
  const cases: [string, unknown, number, unknown][] = [
    ["bad JSON", "{not json", -32700, null],
    ["empty body", "", -32700, null],
    ["batch", [{ jsonrpc: "2.0", id: 1, method: "tasks/get", params: { id: "x" } }], -32600, null],
    ["not an object", "42", -32600, null],
    ["no id (notification)", { jsonrpc: "2.0", method: "tasks/get" }, -32600, null],
    ["id of a bad type", { jsonrpc: "2.0", id: { a: 1 }, method: "tasks/get" }, -32600, null],
    ["wrong jsonrpc", { jsonrpc: "1.0", id: 7, method: "tasks/get" }, -32600, 7],
    ["missing method", { jsonrpc: "2.0", id: "m" }, -32600, "m"],
    ["method not a string", { jsonrpc: "2.0", id: 8, method: 3 }, -32600, 8],
    ["params not an object", { jsonrpc: "2.0", id: 9, method: "tasks/get", params: [1] }, -32602, 9],
    ["unknown method", { jsonrpc: "2.0", id: 10, method: "tasks/list" }, -32601, 10],
  ];
  for (const [name, body, code, id] of cases) {
    const res = await rpc(url, "agent", body);
    t.equal(res.status, 200, `${name}: HTTP 200`);
    t.equal(res.json?.jsonrpc, "2.0", `${name}: a JSON-RPC envelope`);
    t.equal(res.json?.error?.code, code, `${name}: ${code} (${res.json?.error?.message})`);
    t.same(res.json?.id, id, `${name}: id ${JSON.stringify(id)}`);
  }
});

t.test("a body that is not JSON at all, with another content type, is still -32700", async (t) => {
  const res = await fetch(`${url}/a2a/agent`, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: "a=1" });
  const json = (await res.json()) as { error: { code: number } };
  t.equal(json.error.code, -32700);
});

t.test("invalid params and unknown assistants are -32602", async (t) => {
  const cases: [string, string, unknown, RegExp][] = [
    ["no message", "agent", { jsonrpc: "2.0", id: 1, method: "message/send", params: {} }, /params\.message/],
    [
      "no parts",
      "agent",
      { jsonrpc: "2.0", id: 1, method: "message/send", params: { message: { role: "user", parts: [], messageId: "m" } } },
      /at least one part/,
    ],
    [
      "unknown part kind",
      "agent",
      { jsonrpc: "2.0", id: 1, method: "message/send", params: { message: { role: "user", parts: [{ kind: "video" }], messageId: "m" } } },
      /params\.message\.parts\.0/,
    ],
    ["contextId not a UUID", "agent", send("hi", { message: textMessage("hi", { contextId: "session-42" }) }), /contextId must be a UUID/],
    ["unknown assistant (graph id)", "nope", send("hi"), /Assistant 'nope' not found/],
    ["unknown assistant (UUID)", "00000000-0000-4000-8000-000000000000", send("hi"), /not found/],
    ["text to a graph without messages", "counter", send("hi"), /no 'messages' key/],
    ["historyLength negative", "agent", { jsonrpc: "2.0", id: 1, method: "tasks/get", params: { id: "x", historyLength: -1 } }, /historyLength/],
    ["tasks/get without id", "agent", { jsonrpc: "2.0", id: 1, method: "tasks/get", params: {} }, /params\.id/],
  ];
  for (const [name, assistant, body, message] of cases) {
    const res = await rpc(url, assistant, body);
    t.equal(res.json?.error?.code, -32602, `${name}: -32602 (${res.json?.error?.message})`);
    t.match(res.json?.error?.message, message, name);
    t.equal(res.json?.id, (body as { id: unknown }).id, `${name}: id echoed`);
  }
});

t.test("task errors: -32001 unknown task, -32002 not cancelable, -32004 unsupported, -32005 file parts", async (t) => {
  const unknown = await rpc(url, "agent", { jsonrpc: "2.0", id: 1, method: "tasks/get", params: { id: "00000000-0000-4000-8000-000000000000" } });
  t.equal(unknown.json.error.code, -32001);
  const notUuid = await rpc(url, "agent", { jsonrpc: "2.0", id: 1, method: "tasks/cancel", params: { id: "task-1" } });
  t.equal(notUuid.json.error.code, -32001);

  const done = await rpc(url, "agent", send("finish"));
  t.equal(done.json.result.status.state, "completed");
  const taskId = done.json.result.id;
  const cancel = await rpc(url, "agent", { jsonrpc: "2.0", id: 2, method: "tasks/cancel", params: { id: taskId } });
  t.equal(cancel.json.error.code, -32002, "a completed task is not cancelable");
  // A task of another assistant is not found here.
  const elsewhere = await rpc(url, "delay", { jsonrpc: "2.0", id: 3, method: "tasks/get", params: { id: taskId } });
  t.equal(elsewhere.json.error.code, -32001);
  // A message naming a terminal task.
  const again = await rpc(url, "agent", send("more", { message: textMessage("more", { taskId }) }));
  t.equal(again.json.error.code, -32004);
  t.match(again.json.error.message, /terminal/);

  // Push configs (test/a2a/push.test.ts covers delivery): the default URL policy refuses loopback receivers.
  const refused = await rpc(url, "agent", {
    jsonrpc: "2.0",
    id: 4,
    method: "tasks/pushNotificationConfig/set",
    params: { taskId, pushNotificationConfig: { url: "http://127.0.0.1:1/hook" } },
  });
  t.equal(refused.json.error.code, -32602, "a URL the webhook policy refuses");
  t.match(refused.json.error.message, /127\.0\.0\.1|private|loopback/i);
  for (const method of ["tasks/pushNotificationConfig/get", "tasks/pushNotificationConfig/list"]) {
    const res = await rpc(url, "agent", { jsonrpc: "2.0", id: method, method, params: { id: crypto.randomUUID() } });
    t.equal(res.json.error.code, -32001, `${method} of an unknown task`);
  }
  const withPush = await rpc(url, "agent", send("hi", { configuration: { pushNotificationConfig: { url: "http://127.0.0.1:1/hook" } } }));
  t.equal(withPush.json.error.code, -32602, "message/send with a pushNotificationConfig the policy refuses");
  const card = await rpc(url, "agent", { jsonrpc: "2.0", id: 5, method: "agent/getAuthenticatedExtendedCard" });
  t.equal(card.json.error.code, -32004);

  const file = await rpc(url, "agent", {
    jsonrpc: "2.0",
    id: 6,
    method: "message/send",
    params: {
      message: {
        role: "user",
        messageId: "f",
        parts: [
          { kind: "text", text: "see file" },
          { kind: "file", file: { uri: "http://127.0.0.1:1/a.png", mimeType: "image/png" } },
        ],
      },
    },
  });
  t.equal(file.json.error.code, -32005);
  t.match(file.json.error.message, /File parts \(image\/png\) are not supported/);
});

t.test("protocol version: A2A-Version header and method names", async (t) => {
  const bad = await rpc(url, "agent", { jsonrpc: "2.0", id: 1, method: "GetTask", params: { id: "x" } }, { "A2A-Version": "2.0" });
  t.equal(bad.json.error.code, -32009);
  t.equal(bad.json.id, 1);
  t.equal(bad.json.error.data[0].reason, "VERSION_NOT_SUPPORTED");
  const v03only = await rpc(url, "agent", { jsonrpc: "2.0", id: 2, method: "SendMessage", params: {} }, { "A2A-Version": "0.3" });
  t.equal(v03only.json.error.code, -32601, "v1.0 names are unknown to an explicit 0.3 client");
  const legacyOnV1 = await rpc(url, "agent", send("legacy name, v1 header"), { "A2A-Version": "1.0" });
  t.equal(legacyOnV1.json.result.kind, "task", "a v0.3 name answers in v0.3 shapes whatever the header");
  t.equal(legacyOnV1.json.result.status.state, "completed");

  const v1 = await rpc(
    url,
    "agent",
    {
      jsonrpc: "2.0",
      id: 3,
      method: "SendMessage",
      params: { message: { messageId: "v1m", role: "ROLE_USER", parts: [{ text: "hello v1" }] }, configuration: { historyLength: 1 } },
    },
    { "A2A-Version": "1.0" },
  );
  const task = v1.json.result.task;
  t.ok(task, "v1.0 results are wrapped");
  t.equal(task.kind, undefined, "no kind in v1.0");
  t.equal(task.status.state, "TASK_STATE_COMPLETED");
  t.same(task.artifacts[0].parts, [{ text: "You said: hello v1" }]);
  t.equal(task.history.length, 1, "historyLength 1");
  t.equal(task.history[0].role, "ROLE_AGENT");

  const notFound = await rpc(
    url,
    "agent",
    { jsonrpc: "2.0", id: 4, method: "GetTask", params: { id: "00000000-0000-4000-8000-000000000000" } },
    { "A2A-Version": "1.0" },
  );
  t.equal(notFound.json.error.code, -32001);
  t.same(notFound.json.error.data, [{ "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason: "TASK_NOT_FOUND", domain: "a2a-protocol.org" }]);

  const list = await rpc(url, "agent", { jsonrpc: "2.0", id: 5, method: "ListTasks", params: { contextId: task.contextId } }, { "A2A-Version": "1.0" });
  t.equal(list.json.result.tasks.length, 1);
  t.equal(list.json.result.tasks[0].id, task.id);
  t.equal(list.json.result.tasks[0].artifacts, undefined, "artifacts only when asked");
  t.equal(list.json.result.totalSize, 1);
  const badPage = await rpc(url, "agent", { jsonrpc: "2.0", id: 6, method: "ListTasks", params: { pageSize: 0 } }, { "A2A-Version": "1.0" });
  t.equal(badPage.json.error.code, -32602);
});

t.test("v1.0 timestamps are RFC 3339 in UTC with Z (protobuf JSON); v0.3 keeps +00:00", async (t) => {
  const PROTOBUF_TIMESTAMP = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3}|\.\d{6}|\.\d{9})?Z$/;
  const v1 = { "A2A-Version": "1.0" };
  const sent = await rpc(
    url,
    "agent",
    { jsonrpc: "2.0", id: 1, method: "SendMessage", params: { message: { messageId: "ts1", role: "ROLE_USER", parts: [{ text: "when" }] } } },
    v1,
  );
  const task = sent.json.result.task;
  t.match(task.status.timestamp, PROTOBUF_TIMESTAMP, "SendMessage");
  const got = (await rpc(url, "agent", { jsonrpc: "2.0", id: 2, method: "GetTask", params: { id: task.id } }, v1)).json.result;
  t.equal(got.status.timestamp, task.status.timestamp, "GetTask: the same instant, the same text");
  const listed = (await rpc(url, "agent", { jsonrpc: "2.0", id: 3, method: "ListTasks", params: { contextId: task.contextId } }, v1)).json.result.tasks;
  t.equal(listed[0].status.timestamp, task.status.timestamp, "ListTasks");
  const none = (
    await rpc(
      url,
      "agent",
      { jsonrpc: "2.0", id: 4, method: "ListTasks", params: { contextId: task.contextId, statusTimestampAfter: task.status.timestamp } },
      v1,
    )
  ).json.result;
  t.same(none.tasks, [], "a Z timestamp is a valid statusTimestampAfter");

  const streamed = await rpc(
    url,
    "agent",
    { jsonrpc: "2.0", id: 5, method: "SendStreamingMessage", params: { message: { messageId: "ts2", role: "ROLE_USER", parts: [{ text: "stream when" }] } } },
    { ...v1, accept: "text/event-stream" },
  );
  const stamps = streamed.events.flatMap((e) => [e.result.task?.status?.timestamp, e.result.statusUpdate?.status?.timestamp]).filter((x) => x !== undefined);
  t.ok(stamps.length >= 2, "the task and its status updates carry timestamps");
  for (const stamp of stamps) t.match(stamp, PROTOBUF_TIMESTAMP, `stream: ${stamp}`);

  const legacy = (await rpc(url, "agent", { jsonrpc: "2.0", id: 6, method: "tasks/get", params: { id: task.id } })).json.result;
  t.match(legacy.status.timestamp, /\+00:00$/, "v0.3 keeps its form");
  t.equal(Date.parse(legacy.status.timestamp), Date.parse(task.status.timestamp), "both name the same instant");
  // Timestamps written by other versions of the server: digits kept, other offsets made UTC.
  t.equal(protobufTimestamp("2025-01-02T03:04:05.123456+00:00"), "2025-01-02T03:04:05.123456Z");
  t.equal(protobufTimestamp("2025-01-02T03:04:05Z"), "2025-01-02T03:04:05Z");
  t.equal(protobufTimestamp("2025-01-02T05:04:05.5+02:00"), "2025-01-02T03:04:05.500Z");
});

t.test("ListTasks pages the tasks of an assistant", async (t) => {
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) ids.push((await rpc(url, "delay", send(`n${i}`))).json.result.id);
  const page1 = await rpc(url, "delay", { jsonrpc: "2.0", id: 1, method: "ListTasks", params: { pageSize: 2, includeArtifacts: true } });
  t.same(
    page1.json.result.tasks.map((x: { id: string }) => x.id),
    [ids[2], ids[1]],
    "newest first",
  );
  t.equal(page1.json.result.nextPageToken, "2");
  t.equal(page1.json.result.totalSize, 3);
  t.ok(page1.json.result.tasks[0].artifacts[0].parts[0].text.startsWith("waited"));
  const page2 = await rpc(url, "delay", { jsonrpc: "2.0", id: 2, method: "ListTasks", params: { pageSize: 2, pageToken: "2" } });
  t.same(
    page2.json.result.tasks.map((x: { id: string }) => x.id),
    [ids[0]],
  );
  t.equal(page2.json.result.nextPageToken, "");
  const failed = await rpc(url, "delay", { jsonrpc: "2.0", id: 3, method: "ListTasks", params: { status: "TASK_STATE_FAILED" } });
  t.same(failed.json.result.tasks, []);
});

t.test("ListTasks and tasks/get over the runs table: a resumed task is one task; state and time filters; a deleted context takes its tasks", async (t) => {
  const list = async (params: Record<string, unknown> = {}) =>
    (await rpc(url, "interrupt", { jsonrpc: "2.0", id: "l", method: "ListTasks", params }, { "A2A-Version": "1.0" })).json.result;
  const get = async (id: string) => (await rpc(url, "interrupt", { jsonrpc: "2.0", id: "g", method: "tasks/get", params: { id } })).json;
  const before = (await list()).totalSize as number;
  const a = (await rpc(url, "interrupt", send("start a"))).json.result;
  const b = (await rpc(url, "interrupt", send("start b"))).json.result;
  t.equal(a.status.state, "input-required");
  t.equal(b.status.state, "input-required");
  const resumed = (await rpc(url, "interrupt", send("yes", { message: textMessage("yes", { taskId: a.id, contextId: a.contextId }) }))).json.result;
  t.equal(resumed.id, a.id);
  t.equal(resumed.status.state, "completed");

  const all = await list({ pageSize: 2 });
  t.same(
    all.tasks.map((x: { id: string }) => x.id),
    [b.id, a.id],
    "newest first; the run that resumed a is not a task of its own",
  );
  t.equal(all.totalSize, before + 2);
  t.same(
    all.tasks.map((x: { status: { state: string } }) => x.status.state),
    ["TASK_STATE_INPUT_REQUIRED", "TASK_STATE_COMPLETED"],
    "a shows its resuming run's state",
  );
  t.same(
    (await list({ status: "TASK_STATE_COMPLETED" })).tasks.map((x: { id: string }) => x.id),
    [a.id],
    "state filter follows the resuming run",
  );
  const waiting = await list({ status: "TASK_STATE_INPUT_REQUIRED", pageSize: 1 });
  t.same(
    waiting.tasks.map((x: { id: string }) => x.id),
    [b.id],
  );
  t.equal(
    waiting.totalSize,
    1 + (await list({ status: "TASK_STATE_INPUT_REQUIRED", pageSize: 100, pageToken: "1" })).tasks.length,
    "totalSize counts every match",
  );
  const later = await list({ statusTimestampAfter: b.status.timestamp });
  t.same(
    later.tasks.map((x: { id: string }) => x.id),
    [a.id],
    "only tasks whose status changed after b's",
  );
  t.same(
    (await list({ contextId: a.contextId })).tasks.map((x: { id: string }) => x.id),
    [a.id],
    "one context",
  );

  // The run that resumed a, as the REST API lists it: its id is not a task id.
  const runs = (await (await fetch(`${url}/threads/${a.contextId}/runs`)).json()) as { run_id: string }[];
  t.equal(runs.length, 2);
  const continuation = runs.find((r) => r.run_id !== a.id)!.run_id;
  t.equal((await get(continuation)).error.code, -32001);
  t.equal((await get(a.id)).result.status.state, "completed");

  // Deleting a context deletes its tasks (its runs leave the read model).
  t.equal((await fetch(`${url}/threads/${b.contextId}`, { method: "DELETE" })).status, 204);
  t.equal((await get(b.id)).error.code, -32001);
  t.same((await list()).tasks.map((x: { id: string }) => x.id).includes(b.id), false);
  t.equal((await list()).totalSize, before + 1);
});

t.test("a reply too large for one event (written beside the run) reads back whole", async (t) => {
  const text = "x".repeat(300 * 1024);
  const streamed = await rpc(
    url,
    "agent",
    { jsonrpc: "2.0", id: "big", method: "message/stream", params: { message: textMessage(text) } },
    { accept: "text/event-stream" },
  );
  const first = streamed.events[0].result;
  t.equal(first.kind, "task");
  t.equal(first.history[0].parts[0].text.length, text.length, "the task's history before the end: the run's input, resolved");
  const final = streamed.events.find((e: { result: { kind: string } }) => e.result.kind === "artifact-update").result;
  t.equal(final.artifact.parts[0].text, `You said: ${text}`);
  const got = (await rpc(url, "agent", { jsonrpc: "2.0", id: "g", method: "tasks/get", params: { id: first.id } })).json.result;
  t.equal(got.artifacts[0].parts[0].text, `You said: ${text}`, "from the terminal event's values, resolved");
  t.equal(got.history.at(-1).parts[0].text, `You said: ${text}`);
});

t.test("data parts are structured input; the seed's params.thread.threadId names the thread", async (t) => {
  const threadId = "8d1a8b5e-6c0c-4d5e-9f59-2f4c3b1c0e11";
  const body = {
    jsonrpc: "2.0",
    id: "",
    method: "message/send",
    params: { message: { role: "user", parts: [{ kind: "data", data: { count: 40, by: 2 } }] }, messageId: "", thread: { threadId } },
  };
  const res = await rpc(url, "counter", body);
  t.equal(res.json.id, "", "an empty-string id is echoed");
  const task = res.json.result;
  t.equal(task.contextId, threadId);
  t.equal(task.status.state, "completed");
  t.same(JSON.parse(task.artifacts[0].parts[0].text), { count: 42, by: 2 });
  t.same(task.artifacts[0].parts[1], { kind: "data", data: { count: 42, by: 2 } });
  t.equal((await s.client.threads.get(threadId)).thread_id, threadId);
});

t.test("params.thread.threadId continues an existing thread: its state, metadata and runs", async (t) => {
  const thread = await s.client.threads.create({ metadata: { owner: "ada" } });
  t.match(await s.client.runs.wait(thread.thread_id, "counter", { input: { count: 40, by: 2 } }), { count: 42 });
  const body = {
    jsonrpc: "2.0",
    id: "c",
    method: "message/send",
    params: {
      message: { role: "user", messageId: "m-cont", parts: [{ kind: "data", data: { by: 3 } }] },
      thread: { threadId: thread.thread_id.toUpperCase() },
    },
  };
  const task = (await rpc(url, "counter", body)).json.result;
  t.equal(task.contextId, thread.thread_id, "the existing thread is the context (ids compared without case)");
  t.equal(task.status.state, "completed");
  t.same(task.artifacts[0].parts[1], { kind: "data", data: { count: 45, by: 3 } }, "42 from the earlier run, plus 3: the state was continued");
  const after = await s.client.threads.get(thread.thread_id);
  t.same(after.values, { count: 45, by: 3 });
  t.match(after.metadata, { owner: "ada" }, "the thread's metadata is kept");
  const runs = await s.client.runs.list(thread.thread_id);
  t.equal(runs.length, 2, "the A2A run joined the thread's runs");
  t.ok(
    runs.some((r) => r.run_id === task.id),
    "the task is a run of the thread",
  );
});

t.test("a failing graph gives a failed task", async (t) => {
  const res = await rpc(url, "error", send("boom"));
  t.equal(res.json.result.status.state, "failed");
  t.match(res.json.result.status.message.parts[0].text, /CustomError: Boo!/);
});

t.test("streaming methods answer SSE; an error after the envelope is an event of that stream", async (t) => {
  const res = await rpc(
    url,
    "nope",
    { jsonrpc: "2.0", id: 11, method: "message/stream", params: { message: textMessage("x") } },
    { accept: "text/event-stream" },
  );
  t.match(res.contentType, /^text\/event-stream/);
  t.equal(res.events.length, 1);
  t.equal(res.events[0].id, 11);
  t.equal(res.events[0].error.code, -32602);
  const sub = await rpc(
    url,
    "agent",
    { jsonrpc: "2.0", id: 12, method: "SubscribeToTask", params: { id: "00000000-0000-4000-8000-000000000000" } },
    { "A2A-Version": "1.0" },
  );
  t.equal(sub.events[0].error.code, -32001);
  const ok = await rpc(url, "agent", { jsonrpc: "2.0", id: 13, method: "message/stream", params: { message: textMessage("streamed") } });
  t.ok(
    ok.events.every((e) => e.id === 13 && e.jsonrpc === "2.0"),
    "every data line is a complete response with the request id",
  );
  t.same(
    ok.events.map((e) => e.result.kind).filter((k, i, a) => a.indexOf(k) === i),
    ["task", "status-update", "artifact-update"],
  );
  const last = ok.events[ok.events.length - 1].result;
  t.equal(last.final, true);
  t.equal(last.status.state, "completed");
  const artifact = ok.events.find((e) => e.result.kind === "artifact-update").result.artifact;
  t.same(artifact.parts, [{ kind: "text", text: "You said: streamed" }], "the whole reply in one part");
  // Terminal task: v0.3 resubscribe replays the end; v1.0 SubscribeToTask is -32004.
  const taskId = ok.events[0].result.id;
  const re = await rpc(url, "agent", { jsonrpc: "2.0", id: 14, method: "tasks/resubscribe", params: { id: taskId } });
  t.same(
    re.events.map((e) => e.result.kind),
    ["task", "artifact-update", "status-update"],
  );
  const v1 = await rpc(url, "agent", { jsonrpc: "2.0", id: 15, method: "SubscribeToTask", params: { id: taskId } }, { "A2A-Version": "1.0" });
  t.equal(v1.events[0].error.code, -32004);
});

t.test("agent card", async (t) => {
  const res = await fetch(`${url}/.well-known/agent-card.json?assistant_id=agent`);
  t.equal(res.status, 200);
  const card = (await res.json()) as Card;
  const id = defaultAssistantId("agent");
  t.equal(card.protocolVersion, "0.3.0");
  t.equal(card.name, "agent");
  t.equal(card.description, "Example agent (deterministic offline reply)");
  t.equal(card.url, `${url}/a2a/${id}`);
  t.equal(card.preferredTransport, "JSONRPC");
  t.same(card.capabilities, { streaming: true, pushNotifications: true, stateTransitionHistory: false });
  t.same(card.supportedInterfaces[0], { url: `${url}/a2a/${id}`, protocolBinding: "JSONRPC", protocolVersion: "1.0" });
  t.same(card.defaultInputModes, ["text/plain", "application/json"]);
  t.equal(card.skills[0].id, `${id}-main`);
  t.equal(card.skills[0].metadata.inputSchema.supportsA2A, true);
  t.equal(card.securitySchemes, undefined);

  const first = (await (await fetch(`${url}/.well-known/agent-card.json`)).json()) as Card;
  t.equal(first.url, card.url, "without assistant_id: the first graph's default assistant");
  const counter = (await (await fetch(`${url}/a2a/counter/.well-known/agent-card.json`)).json()) as Card;
  t.same(counter.defaultInputModes, ["application/json"], "a graph without messages takes JSON only");
  t.equal(counter.skills[0].metadata.inputSchema.supportsA2A, false);

  const missing = await fetch(`${url}/.well-known/agent-card.json?assistant_id=nope`);
  t.equal(missing.status, 404);
  t.match(((await missing.json()) as { detail: string }).detail, /nope/);

  const proxied = (await (
    await fetch(`${url}/.well-known/agent-card.json?assistant_id=agent`, {
      headers: { "x-forwarded-proto": "https", "x-forwarded-host": "agents.example.com" },
    })
  ).json()) as Card;
  t.equal(proxied.url, `https://agents.example.com/a2a/${id}`);
});

t.test("PUBLIC_URL and LANGGRAPH_API_KEY", async (t) => {
  const secured = await startA2AServer({ env: { PUBLIC_URL: "https://public.example.com/base/", LANGGRAPH_API_KEY: "sekret" } });
  t.teardown(() => secured.close());
  const res = await fetch(`${secured.url}/.well-known/agent-card.json?assistant_id=agent`);
  t.equal(res.status, 200, "the card is public: it says how to authenticate");
  const card = (await res.json()) as Card;
  t.equal(card.url, `https://public.example.com/base/a2a/${defaultAssistantId("agent")}`);
  t.same(card.securitySchemes?.apiKey, { type: "apiKey", in: "header", name: "x-api-key", description: "The server's LANGGRAPH_API_KEY" });
  t.same(card.security, [{ apiKey: [] }]);
  const denied = await rpc(secured.url, "agent", send("hi"));
  t.equal(denied.status, 401);
  const allowed = await rpc(secured.url, "agent", send("hi"), { "x-api-key": "sekret" });
  t.equal(allowed.json.result.status.state, "completed");
});
