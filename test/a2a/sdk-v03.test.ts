/**
 * The official `@a2a-js/sdk` 0.3.14 client (A2A v0.3) against a real server: card discovery, send,
 * stream, get, cancel, resubscribe after a disconnect, a conversation on one contextId, an
 * interrupt answered by a follow-up message, and a task read back after a restart.
 */
import t from "tap";
import { ClientFactory } from "@a2a-js/sdk/client";
import type { Task, TaskStatusUpdateEvent } from "@a2a-js/sdk";
import { startA2AServer, textMessage } from "../support/a2a.js";
import { gates as makeGates } from "../support/gates.js";

let s = await startA2AServer();
t.teardown(() => s.close());

const clientFor = (assistant: string) => new ClientFactory().createFromUrl(`${s.url}/.well-known/agent-card.json?assistant_id=${assistant}`, "");
const asTask = (r: unknown) => r as Task;

t.test("send: the reply is at artifacts[0].parts[0].text; get reads the task back", async (t) => {
  const client = await clientFor("agent");
  const task = asTask(await client.sendMessage({ message: textMessage("hello a2a") }));
  t.equal(task.kind, "task");
  t.equal(task.status.state, "completed");
  t.equal((task.artifacts?.[0]?.parts[0] as { text: string }).text, "You said: hello a2a");
  t.equal(task.artifacts?.[0]?.parts.length, 1);
  const got = await client.getTask({ id: task.id, historyLength: 1 });
  t.equal(got.status.state, "completed");
  t.equal(got.history?.length, 1);
  t.equal((got.history?.[0]?.parts[0] as { text: string }).text, "You said: hello a2a");
  const run = await s.client.runs.get(task.contextId, task.id);
  t.equal(run.status, "success", "the task is the run");
});

t.test("a conversation continued on one contextId: the thread holds every turn", async (t) => {
  const client = await clientFor("agent");
  const first = asTask(await client.sendMessage({ message: textMessage("one") }));
  const second = asTask(await client.sendMessage({ message: textMessage("two", { contextId: first.contextId }) }));
  t.equal(second.contextId, first.contextId);
  t.not(second.id, first.id, "each message is a new task (run)");
  t.same(
    second.history?.map((m) => (m.parts[0] as { text: string }).text),
    ["one", "You said: one", "two", "You said: two"],
  );
  const state = await s.client.threads.getState<{ messages: { content: string }[] }>(first.contextId);
  t.same(
    state.values.messages.map((m) => m.content),
    ["one", "You said: one", "two", "You said: two"],
  );
});

t.test("stream: task, working, artifact with the whole reply, final status; the SDK aggregates", async (t) => {
  const client = await clientFor("agent");
  const kinds: string[] = [];
  let final: TaskStatusUpdateEvent | undefined;
  let artifactText = "";
  for await (const event of client.sendMessageStream({ message: textMessage("streaming") })) {
    kinds.push(event.kind);
    if (event.kind === "artifact-update") artifactText = (event.artifact.parts[0] as { text: string }).text;
    if (event.kind === "status-update" && event.final) final = event;
  }
  t.equal(kinds[0], "task");
  t.ok(kinds.includes("artifact-update"));
  t.equal(kinds[kinds.length - 1], "status-update");
  t.equal(final?.status.state, "completed");
  t.equal(artifactText, "You said: streaming");
});

t.test("cancel a running task", async (t) => {
  const client = await clientFor("delay");
  const started = asTask(
    await client.sendMessage({
      message: {
        ...textMessage("slow"),
        parts: [
          { kind: "text", text: "slow" },
          { kind: "data", data: { delay: 60_000 } },
        ],
      },
      configuration: { blocking: false },
    }),
  );
  t.match(started.status.state, /submitted|working/);
  const canceled = await client.cancelTask({ id: started.id });
  t.equal(canceled.status.state, "canceled");
  t.equal((await client.getTask({ id: started.id })).status.state, "canceled");
  await t.rejects(client.cancelTask({ id: started.id }), { name: "TaskNotCancelableError" }, "a canceled task is not cancelable again");
  await t.rejects(client.getTask({ id: "00000000-0000-4000-8000-000000000000" }), { name: "TaskNotFoundError" });
});

t.test("resubscribe after a disconnect replays from the task and ends with the final status", async (t) => {
  const client = await clientFor("delay");
  const controller = new AbortController();
  let taskId = "";
  // The task waits at its gate until the client has re-attached.
  const gates = makeGates(t);
  const message = {
    ...textMessage("wait"),
    parts: [
      { kind: "text" as const, text: "wait" },
      { kind: "data" as const, data: { gate: gates.path("wait") } },
    ],
  };
  try {
    for await (const event of client.sendMessageStream({ message }, { signal: controller.signal })) {
      if (event.kind === "task") {
        taskId = event.id;
        controller.abort(); // the client goes away after the first event
      }
    }
  } catch {
    // aborted
  }
  t.ok(taskId);
  const events = [];
  for await (const event of client.resubscribeTask({ id: taskId })) {
    if (events.length === 0) gates.open("wait");
    events.push(event);
  }
  t.equal(events[0].kind, "task");
  t.match((events[0] as Task).status.state, /submitted|working/, "the task was still running");
  const last = events[events.length - 1] as TaskStatusUpdateEvent;
  t.equal(last.kind, "status-update");
  t.equal(last.final, true);
  t.equal(last.status.state, "completed");
  const artifact = events.find((e) => e.kind === "artifact-update");
  t.equal(artifact?.kind === "artifact-update" && (artifact.artifact.parts[0] as { text: string }).text, "waited 0ms");
});

t.test("an interrupt is input-required; a follow-up message on the task resumes it", async (t) => {
  const client = await clientFor("interrupt");
  const asked = asTask(await client.sendMessage({ message: textMessage("start") }));
  t.equal(asked.status.state, "input-required");
  t.equal((asked.status.message?.parts[0] as { text: string }).text, JSON.stringify({ question: "Continue?" }));
  const interrupt = (asked.artifacts?.[0]?.parts[0] as { data: Record<string, unknown> }).data;
  t.equal(asked.artifacts?.[0]?.name, "Interrupt");
  t.same(interrupt.value, { question: "Continue?" });
  const answered = asTask(await client.sendMessage({ message: textMessage("yes", { taskId: asked.id, contextId: asked.contextId }) }));
  t.equal(answered.id, asked.id, "the same task");
  t.equal(answered.status.state, "completed");
  t.equal((answered.artifacts?.[0]?.parts[0] as { text: string }).text, "You answered: yes");
  const got = await client.getTask({ id: asked.id });
  t.equal(got.status.state, "completed", "tasks/get follows the task to the run that resumed it");
  await t.rejects(client.sendMessage({ message: textMessage("again", { taskId: asked.id }) }), { name: "UnsupportedOperationError" });
});

t.test("a task is read back after a restart (read model, no memory of the process)", async (t) => {
  const client = await clientFor("agent");
  const task = asTask(await client.sendMessage({ message: textMessage("remember me") }));
  s = await s.restart();
  const after = await clientFor("agent");
  const got = await after.getTask({ id: task.id });
  t.equal(got.status.state, "completed");
  t.equal((got.artifacts?.[0]?.parts[0] as { text: string }).text, "You said: remember me");
  t.same(
    got.history?.map((m) => m.role),
    ["user", "agent"],
  );
});
