/**
 * The A2A application layer: tasks on top of the same run services the REST API uses
 * (RunsService.create / waitDone / cancel / view, the runs read model, the run's log stream).
 * Every application error goes through `toA2AError`.
 */
import { randomUUID } from "node:crypto";
import { validate as isUuid } from "uuid";
import type { AppContext } from "../app/context.js";
import type { RunRequest, RunsService } from "../app/runs.js";
import { getAssistant } from "../app/assistants.js";
import type { Assistant } from "../domain/assistants.js";
import { runStream, type RunView } from "../domain/runs.js";
import type { JsonObject } from "../domain/json.js";
import { A2AError, ErrorCode, invalidParams, taskNotFound, toA2AError, unsupported } from "./errors.js";
import { deltaOf, inputOfMessage, resumeOfMessage, type GraphInput } from "./parts.js";
import { artifactsOf, statusOf, taskOf, taskStateOf } from "./task-view.js";
import type { TaskIndex } from "./task-index.js";
import type { GraphInputShape } from "./card.js";
import { TERMINAL_STATES, type ListParams, type SendParams, type StreamEvent, type Task, type TaskPage } from "./types.js";

/** Run metadata key of the runs that continue a task after an interrupt (the task keeps its first run's id). */
export const TASK_ID_KEY = "a2a_task_id";
/** How many of a context's newest runs are searched for a task's continuation. */
const CONTINUATION_WINDOW = 100;

export interface StreamItem {
  event: StreamEvent;
  /** The run stream revision it came from (the SSE id). */
  revision?: bigint;
}

type Headers = Record<string, string | string[] | undefined>;

export class A2AService {
  private readonly shapes = new Map<string, Promise<GraphInputShape>>();

  constructor(
    private readonly ctx: AppContext,
    private readonly runs: RunsService,
    private readonly index: TaskIndex,
  ) {}

  /** The assistant of `/a2a/{assistant_id}` (a UUID or a graph id); unknown → -32602. */
  assistant(idOrGraph: string): Assistant {
    try {
      return getAssistant(this.ctx, idOrGraph);
    } catch (error) {
      const e = toA2AError(error, "assistant");
      throw e.code === ErrorCode.InvalidParams ? invalidParams(`Assistant '${idOrGraph}' not found`) : e;
    }
  }

  /** What the graph's input takes (cached per graph: schemas do not change while the server runs). */
  graphShape(graphId: string): Promise<GraphInputShape> {
    let shape = this.shapes.get(graphId);
    if (!shape) {
      shape = this.ctx.graphs.schemas(graphId).then(({ input_schema, state_schema }) => {
        const schema = (input_schema ?? state_schema ?? {}) as { properties?: Record<string, unknown>; required?: string[] };
        const properties = Object.keys(schema.properties ?? {}).sort();
        return { acceptsMessages: properties.includes("messages"), properties, required: schema.required ?? [] };
      });
      shape.catch(() => this.shapes.delete(graphId));
      this.shapes.set(graphId, shape);
    }
    return shape;
  }

  /** The run that holds a task now: its first run, or the newest run that resumed it. */
  resolve(assistant: Assistant, taskId: string): { view: RunView; taskId: string } {
    const id = taskId.toLowerCase();
    const first = isUuid(id) ? this.runs.view(id) : undefined;
    if (!first || first.run.assistant_id !== assistant.assistant_id) throw taskNotFound(taskId);
    // Only a task that waited for input can have been resumed by a later run.
    if (taskStateOf(first) !== "input-required") return { view: first, taskId: id };
    const latest = this.index.runsOf({ assistantId: assistant.assistant_id, contextId: first.run.thread_id })
      .slice(0, CONTINUATION_WINDOW)
      .find((r) => r.metadata[TASK_ID_KEY] === id);
    const view = latest ? this.runs.view(latest.run_id) : undefined;
    return { view: view ?? first, taskId: id };
  }

  /** Starts the run of a message: a new task on its context, or the resumption of a task waiting for input. */
  async start(assistant: Assistant, p: SendParams, headers: Headers, streaming: boolean): Promise<{ view: RunView; taskId: string }> {
    if (p.pushNotification) throw unsupported("push notifications are not supported");
    const message = p.message;
    let threadId: string;
    let plan: GraphInput;
    let taskId: string | undefined;
    if (message.taskId) {
      const resolved = this.resolve(assistant, message.taskId);
      const state = taskStateOf(resolved.view);
      if (TERMINAL_STATES.has(state)) {
        throw unsupported(`Task '${message.taskId}' is ${state}: a terminal task takes no more messages; send one without taskId to start a new task in its context`);
      }
      if (state !== "input-required") throw unsupported(`Task '${message.taskId}' is still ${state}; wait for it to end or cancel it`);
      threadId = resolved.view.run.thread_id;
      if (message.contextId && message.contextId.toLowerCase() !== threadId) {
        throw invalidParams(`contextId '${message.contextId}' is not the context of task '${message.taskId}' (${threadId})`);
      }
      taskId = resolved.taskId;
      plan = resumeOfMessage(message, p.command);
    } else {
      const contextId = message.contextId ?? p.threadId;
      if (contextId !== undefined && !isUuid(contextId)) throw invalidParams(`contextId must be a UUID (it names a thread), got '${contextId}'`);
      threadId = contextId?.toLowerCase() ?? randomUUID();
      const shape = await this.graphShape(assistant.graph_id);
      plan = p.command?.resume !== undefined ? resumeOfMessage(message, p.command) : inputOfMessage(message, shape.acceptsMessages, assistant.assistant_id);
    }
    const metadata: JsonObject = taskId ? { [TASK_ID_KEY]: taskId } : {};
    const request: RunRequest = {
      assistant_id: assistant.assistant_id,
      if_not_exists: "create",
      metadata,
      // A stream shows the reply as it is produced (AI message chunks); a send needs only the end.
      stream_mode: streaming ? ["messages-tuple"] : ["values"],
    };
    if (plan.input) request.input = plan.input;
    if (plan.command) request.command = plan.command;
    let runId: string;
    try {
      runId = (await this.runs.create(threadId, request, headers)).run_id;
    } catch (error) {
      throw toA2AError(error, "thread");
    }
    const view = this.runs.view(runId);
    if (!view) throw new A2AError(ErrorCode.Internal, `run ${runId} vanished after it was created`);
    return { view, taskId: taskId ?? runId };
  }

  /** The task once its run ended (or the client left / the server stops: as it is then). */
  async settled(runId: string, taskId: string, historyLength: number | undefined, signal?: AbortSignal): Promise<Task> {
    const view = await this.runs.waitDone(runId, signal);
    if (!view) throw taskNotFound(taskId);
    return taskOf(view, { taskId, historyLength });
  }

  get(assistant: Assistant, taskId: string, historyLength: number | undefined): Task {
    const { view, taskId: id } = this.resolve(assistant, taskId);
    return taskOf(view, { taskId: id, historyLength });
  }

  async cancel(assistant: Assistant, taskId: string): Promise<Task> {
    const { view, taskId: id } = this.resolve(assistant, taskId);
    const state = taskStateOf(view);
    if (TERMINAL_STATES.has(state) || state === "input-required") {
      throw new A2AError(ErrorCode.TaskNotCancelable, `Task '${taskId}' is ${state} and cannot be canceled`);
    }
    try {
      await this.runs.cancel(null, view.run.run_id, "interrupt");
    } catch (error) {
      throw toA2AError(error, "task");
    }
    const after = await this.runs.waitDone(view.run.run_id);
    if (!after) throw taskNotFound(taskId);
    const task = taskOf(after, { taskId: id });
    if (task.status.state !== "canceled") {
      throw new A2AError(ErrorCode.TaskNotCancelable, `Task '${taskId}' ended as ${task.status.state} before it could be canceled`);
    }
    return task;
  }

  /** ListTasks: the tasks of a context (or of the assistant), newest first, `pageToken` = offset. */
  list(assistant: Assistant, p: ListParams): TaskPage {
    const after = p.statusTimestampAfter ? Date.parse(p.statusTimestampAfter) : undefined;
    const all: Task[] = [];
    for (const record of this.index.runsOf({ assistantId: assistant.assistant_id, contextId: p.contextId })) {
      if (record.metadata[TASK_ID_KEY] !== undefined) continue; // a continuation: listed as its task
      let task: Task;
      try {
        const { view, taskId } = this.resolve(assistant, record.run_id);
        task = taskOf(view, { taskId, historyLength: p.historyLength, includeArtifacts: p.includeArtifacts });
      } catch (error) {
        if (error instanceof A2AError && error.code === ErrorCode.TaskNotFound) continue; // removed meanwhile
        throw error;
      }
      if (p.state && task.status.state !== p.state) continue;
      if (after !== undefined && Date.parse(task.status.timestamp ?? "") <= after) continue;
      all.push(task);
    }
    const tasks = all.slice(p.offset, p.offset + p.pageSize);
    const next = p.offset + p.pageSize;
    return { tasks, nextPageToken: next < all.length ? String(next) : "", pageSize: tasks.length, totalSize: all.length };
  }

  /**
   * The events of a task's run, tailed from its log (after `from`): `working` once a worker has it,
   * the reply's text as it is produced (status messages, never the artifact), then the artifact
   * with the whole reply in one part and the final status.
   */
  async *events(runId: string, taskId: string, from: bigint | "start", signal: AbortSignal): AsyncGenerator<StreamItem> {
    const contextId = this.runs.view(runId)?.run.thread_id ?? "";
    const subscription = this.ctx.store.subscribeToStream(runStream(runId), { fromRevision: from });
    const stop = () => void subscription.close();
    signal.addEventListener("abort", stop, { once: true });
    let working = false;
    const workingUpdate = (revision: bigint, text?: string): StreamItem => ({
      revision,
      event: {
        kind: "status-update",
        taskId,
        contextId,
        final: false,
        status: {
          state: "working",
          timestamp: this.ctx.now(),
          ...(text === undefined ? {} : { message: { kind: "message", role: "agent", parts: [{ kind: "text", text }], messageId: `${taskId}-delta-${revision}`, taskId, contextId } }),
        },
      },
    });
    try {
      for await (const item of subscription) {
        if (signal.aborted) return;
        if (item.kind !== "event") continue;
        const e = item.event;
        if (e.type === "RunEnded") break;
        if (e.type === "RunClaimed" || e.type === "RunOutput") {
          if (!working) {
            working = true;
            yield workingUpdate(e.revision);
          }
          if (e.type === "RunOutput") {
            const d = e.data as { event: string; data: unknown };
            const text = d.event === "messages" ? deltaOf(d.data) : undefined;
            if (text !== undefined) yield workingUpdate(e.revision, text);
          }
        }
      }
    } finally {
      signal.removeEventListener("abort", stop);
      await subscription.close();
    }
    if (signal.aborted) return;
    const view = await this.runs.waitDone(runId, signal);
    if (!view || signal.aborted) return;
    yield* this.finalEvents(view, taskId);
  }

  /** The closing events of an ended run: its artifact, then the status with `final: true`. */
  *finalEvents(view: RunView, taskId: string): Generator<StreamItem> {
    const contextId = view.run.thread_id;
    const revision = typeof view.stream.revision === "bigint" ? view.stream.revision : undefined;
    for (const artifact of artifactsOf(view, taskId)) {
      yield { revision, event: { kind: "artifact-update", taskId, contextId, artifact, append: false, lastChunk: true } };
    }
    yield { revision, event: { kind: "status-update", taskId, contextId, status: statusOf(view, taskId), final: true } };
  }
}
