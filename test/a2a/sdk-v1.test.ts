/**
 * The official `@a2a-js/sdk` 1.x client (A2A v1.0, installed as `a2a-sdk-v1`) against a real
 * server: it picks the card's 1.0 interface and speaks SendMessage, SendStreamingMessage, GetTask,
 * ListTasks, CancelTask and SubscribeToTask with the `A2A-Version: 1.0` header.
 */
import { randomUUID } from "node:crypto";
import t from "tap";
import { ClientFactory } from "a2a-sdk-v1/client";
import { Role, TaskState, type Part, type SendMessageRequest, type Task } from "a2a-sdk-v1";
import { startA2AServer } from "../support/a2a.js";
import { gates as makeGates } from "../support/gates.js";

const s = await startA2AServer();
t.teardown(() => s.close());

const clientFor = (assistant: string) => new ClientFactory().createFromUrl(`${s.url}/.well-known/agent-card.json?assistant_id=${assistant}`, "");

const text = (value: string): Part => ({ content: { $case: "text", value }, metadata: undefined, filename: "", mediaType: "" });
const data = (value: Record<string, unknown>): Part => ({ content: { $case: "data", value }, metadata: undefined, filename: "", mediaType: "" });
function request(parts: Part[], o: { contextId?: string; taskId?: string; returnImmediately?: boolean } = {}): SendMessageRequest {
  return {
    tenant: "",
    message: {
      messageId: randomUUID(),
      contextId: o.contextId ?? "",
      taskId: o.taskId ?? "",
      role: Role.ROLE_USER,
      parts,
      metadata: undefined,
      extensions: [],
      referenceTaskIds: [],
    },
    configuration: o.returnImmediately
      ? { acceptedOutputModes: [], taskPushNotificationConfig: undefined, historyLength: undefined, returnImmediately: true }
      : undefined,
    metadata: undefined,
  };
}
const replyOf = (task: Task) => {
  const c = task.artifacts[0]?.parts[0]?.content;
  return c?.$case === "text" ? c.value : undefined;
};
const asTask = (r: unknown) => {
  if (!r || typeof r !== "object" || !("status" in r)) throw new Error(`not a task: ${JSON.stringify(r)}`);
  return r as Task;
};

t.test("the client picks the 1.0 interface; send, get and list", async (t) => {
  const client = await clientFor("agent");
  t.equal(client.protocolVersion, "1.0");
  const task = asTask(await client.sendMessage(request([text("hello v1")])));
  t.equal(task.status?.state, TaskState.TASK_STATE_COMPLETED);
  t.equal(replyOf(task), "You said: hello v1");
  t.match(task.status?.timestamp, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3})?Z$/, "the status timestamp is RFC 3339 in UTC with Z (protobuf JSON)");
  const again = asTask(await client.sendMessage(request([text("second")], { contextId: task.contextId })));
  t.equal(again.contextId, task.contextId);
  const got = await client.getTask({ tenant: "", id: task.id, historyLength: undefined });
  t.equal(replyOf(got), "You said: hello v1");
  t.equal(got.status?.timestamp, task.status?.timestamp, "GetTask: the same timestamp");
  t.same(
    got.history.map((m) => m.role),
    [Role.ROLE_USER, Role.ROLE_AGENT],
  );
  const list = await client.listTasks({
    tenant: "",
    contextId: task.contextId,
    status: TaskState.TASK_STATE_UNSPECIFIED,
    pageSize: 10,
    pageToken: "",
    historyLength: 0,
    statusTimestampAfter: undefined,
    includeArtifacts: true,
  });
  t.same(
    list.tasks.map((x) => x.id),
    [again.id, task.id],
  );
  t.equal(list.totalSize, 2);
  t.equal(list.tasks[0].history.length, 0, "historyLength 0: no history");
  t.equal(replyOf(list.tasks[0]), "You said: second");
});

t.test("stream: task, status updates, one artifact, final status", async (t) => {
  const client = await clientFor("agent");
  const cases: string[] = [];
  let reply: string | undefined;
  let last: TaskState | undefined;
  for await (const event of client.sendMessageStream(request([text("stream v1")]))) {
    const p = event.payload!;
    cases.push(p.$case);
    if (p.$case === "artifactUpdate")
      reply = p.value.artifact?.parts[0]?.content?.$case === "text" ? (p.value.artifact.parts[0].content.value as string) : undefined;
    if (p.$case === "statusUpdate") last = p.value.status?.state;
  }
  t.equal(cases[0], "task");
  t.ok(cases.includes("artifactUpdate"));
  t.equal(cases[cases.length - 1], "statusUpdate");
  t.equal(reply, "You said: stream v1");
  t.equal(last, TaskState.TASK_STATE_COMPLETED);
});

t.test("cancel, subscribe after a disconnect, and subscribe to a terminal task", async (t) => {
  const client = await clientFor("delay");
  const slow = asTask(await client.sendMessage(request([text("slow"), data({ delay: 60_000 })], { returnImmediately: true })));
  const canceled = await client.cancelTask({ tenant: "", id: slow.id, metadata: undefined });
  t.equal(canceled.status?.state, TaskState.TASK_STATE_CANCELED);
  await t.rejects(client.cancelTask({ tenant: "", id: slow.id, metadata: undefined }), { name: "TaskNotCancelableError" });

  const controller = new AbortController();
  let taskId = "";
  // The task waits at its gate until the client has re-attached.
  const gates = makeGates(t);
  try {
    for await (const event of client.sendMessageStream(request([text("wait"), data({ gate: gates.path("wait") })]), { signal: controller.signal })) {
      if (event.payload?.$case === "task") {
        taskId = event.payload.value.id;
        controller.abort();
      }
    }
  } catch {
    // aborted
  }
  const states: (TaskState | undefined)[] = [];
  let reply: string | undefined;
  for await (const event of client.resubscribeTask({ tenant: "", id: taskId })) {
    gates.open("wait");
    const p = event.payload!;
    if (p.$case === "task" || p.$case === "statusUpdate") states.push(p.value.status?.state);
    if (p.$case === "artifactUpdate")
      reply = p.value.artifact?.parts[0]?.content?.$case === "text" ? (p.value.artifact.parts[0].content.value as string) : undefined;
  }
  t.ok(states[0] === TaskState.TASK_STATE_SUBMITTED || states[0] === TaskState.TASK_STATE_WORKING, "re-attached to a running task");
  t.equal(states[states.length - 1], TaskState.TASK_STATE_COMPLETED);
  t.equal(reply, "waited 0ms");

  const terminal = async () => {
    for await (const _ of client.resubscribeTask({ tenant: "", id: taskId })) void _;
  };
  const error = await terminal().then(
    () => undefined,
    (e: Error & { cause?: { name?: string } }) => e,
  );
  t.equal(error?.cause?.name, "UnsupportedOperationError", "SubscribeToTask on a terminal task is -32004");
});

t.test("interrupt answered by a follow-up message on the task", async (t) => {
  const client = await clientFor("interrupt");
  const asked = asTask(await client.sendMessage(request([text("start")])));
  t.equal(asked.status?.state, TaskState.TASK_STATE_INPUT_REQUIRED);
  const answered = asTask(await client.sendMessage(request([data({ resume: "go on" })], { taskId: asked.id, contextId: asked.contextId })));
  t.equal(answered.id, asked.id);
  t.equal(answered.status?.state, TaskState.TASK_STATE_COMPLETED);
  t.equal(replyOf(answered), "You answered: go on");
});

t.test("errors come back as the SDK's typed errors", async (t) => {
  const client = await clientFor("agent");
  await t.rejects(client.getTask({ tenant: "", id: randomUUID(), historyLength: undefined }), { name: "TaskNotFoundError" });
  const file: Part = { content: { $case: "url", value: "http://127.0.0.1:1/x.pdf" }, metadata: undefined, filename: "x.pdf", mediaType: "application/pdf" };
  await t.rejects(client.sendMessage(request([file])), { name: "ContentTypeNotSupportedError" });
});
