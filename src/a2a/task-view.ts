/**
 * A task is a run (pure): its state, reply artifact and history, from the run's record and status
 * as the read model holds them and its terminal event (`RunsService.terminalEvent`: the values and
 * interrupts the read model does not keep) — so a task reads the same after a restart and on any
 * server process. `ended` is that event, undefined while the run has not ended; the read model's
 * slim copy stands in when it is missing.
 */
import type { RunEnded, RunView } from "../domain/runs.js";
import { isPlainObject } from "../domain/json.js";
import { historyOf, replyOf } from "./parts.js";
import type { Artifact, Message, Task, TaskState, TaskStatus } from "./types.js";

/** A run ended as "interrupted" is waiting for input when its graph interrupted, canceled otherwise. */
export function taskStateOf(v: RunView, terminal: RunEnded | undefined): TaskState {
  const ended = terminal ?? v.stream.ended;
  if (!ended) return v.stream.owner ? "working" : "submitted";
  switch (ended.status) {
    case "success":
      return "completed";
    case "error":
    case "timeout":
      return "failed";
    case "interrupted":
    case "rollback":
      return !v.stream.cancel && interruptsOf(ended).length > 0 ? "input-required" : "canceled";
  }
}

/**
 * Whether the read model's view alone gives the task state: only a run interrupted without a
 * cancel request needs its terminal event (its interrupts say input-required or canceled).
 */
export const stateNeedsTerminal = (v: RunView) => (v.stream.ended?.status === "interrupted" || v.stream.ended?.status === "rollback") && !v.stream.cancel;

function interruptsOf(ended: RunEnded | undefined): { id?: unknown; value?: unknown }[] {
  const all = Object.values(ended?.interrupts ?? {}).flatMap((list) => (Array.isArray(list) ? list : []));
  return all.filter(isPlainObject);
}

const agentMessage = (id: string, text: string, taskId: string, contextId: string): Message => ({
  kind: "message",
  role: "agent",
  parts: [{ kind: "text", text }],
  messageId: id,
  taskId,
  contextId,
});

const valueText = (value: unknown) => (typeof value === "string" ? value : JSON.stringify(value ?? null));

/** The final artifact of an ended run: the whole reply in one text part, or the interrupts. */
export function artifactsOf(v: RunView, ended: RunEnded | undefined, taskId: string): Artifact[] {
  const state = taskStateOf(v, ended);
  const runId = v.run.run_id;
  if (state === "completed") {
    const reply = replyOf(ended?.values);
    return [
      {
        artifactId: `${runId}-response`,
        name: "Assistant Response",
        description: `Response from assistant ${v.run.assistant_id}`,
        parts: reply.data
          ? [
              { kind: "text", text: reply.text },
              { kind: "data", data: reply.data },
            ]
          : [{ kind: "text", text: reply.text }],
      },
    ];
  }
  if (state === "input-required") {
    return [
      {
        artifactId: `${runId}-interrupt`,
        name: "Interrupt",
        description: `Assistant ${v.run.assistant_id} is waiting for input (task ${taskId})`,
        parts: interruptsOf(ended).map((i) => ({ kind: "data" as const, data: { id: i.id ?? null, value: i.value ?? null } })),
      },
    ];
  }
  return [];
}

export function statusOf(v: RunView, terminal: RunEnded | undefined, taskId: string): TaskStatus {
  const state = taskStateOf(v, terminal);
  const ended = terminal ?? v.stream.ended;
  const status: TaskStatus = { state, timestamp: ended?.ended_at ?? v.run.updated_at };
  const contextId = v.run.thread_id;
  const runId = v.run.run_id;
  if (state === "completed") status.message = agentMessage(`${runId}-reply`, replyOf(ended?.values).text, taskId, contextId);
  if (state === "failed") {
    const e = ended?.error;
    status.message = agentMessage(`${runId}-error`, `Error executing assistant: ${e ? `${e.error}: ${e.message}` : ended?.status}`, taskId, contextId);
  }
  if (state === "input-required") {
    const first = interruptsOf(ended)[0];
    status.message = agentMessage(`${runId}-interrupt`, valueText(first?.value), taskId, contextId);
  }
  return status;
}

export interface TaskViewOptions {
  /** The A2A task id (the run id, or the first run's id for a task resumed by later runs). */
  taskId?: string;
  /** Unset: the whole conversation; 0: none; n: the n most recent messages. */
  historyLength?: number;
  /** Default true; ListTasks leaves artifacts out unless asked. */
  includeArtifacts?: boolean;
}

export function taskOf(v: RunView, ended: RunEnded | undefined, o: TaskViewOptions = {}): Task {
  const taskId = o.taskId ?? v.run.run_id;
  const contextId = v.run.thread_id;
  const task: Task = { kind: "task", id: taskId, contextId, status: statusOf(v, ended, taskId) };
  if (o.includeArtifacts !== false) {
    const artifacts = artifactsOf(v, ended, taskId);
    if (artifacts.length) task.artifacts = artifacts;
  }
  if (o.historyLength !== 0) {
    // Ended: the conversation as the run left it; before that: what the run was given.
    const source = ended?.values !== undefined ? ended.values : v.run.kwargs.input;
    const history = historyOf(source, { taskId, contextId });
    task.history = o.historyLength === undefined ? history : history.slice(Math.max(0, history.length - o.historyLength));
  }
  return task;
}
