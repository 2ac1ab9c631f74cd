/**
 * The A2A application layer: tasks on top of the same run services the REST API uses
 * (RunsService.create / waitShown / cancel / view / terminalEvent, the runs read model, the run's
 * log stream). Every application error goes through `toA2AError`.
 */
import { validate as isUuid } from "uuid";
import type { AppContext } from "../app/context.js";
import type { AuthorizedRun, RunsService } from "../app/runs.js";
import type { Caller } from "../app/auth/caller.js";
import type { RunRequest } from "../domain/run-request.js";
import { getAssistant } from "../app/assistants.js";
import { assistantHidden } from "../app/visible-assistants.js";
import type { Assistant } from "../domain/assistants.js";
import type { RunEnded, RunView } from "../domain/runs.js";
import { chunkOf, tailRun } from "../runtime/run-tail.js";
import { isEvent } from "../domain/event-of.js";
import type { JsonObject } from "../domain/json.js";
import type { RunRecord } from "../domain/run-record.js";
import type { SqlFragment } from "../read-models/json-filter.js";
import { pushDeliveryKey, type StoredPushConfig } from "../domain/a2a-push.js";
import { catchUpPushRunEnd, deletePushConfig, setPushConfig } from "../app/a2a-push.js";
import { checkWebhookUrl } from "../webhooks/url-policy.js";
import { webhookUrlPolicyFor } from "../webhooks/mode-policy.js";
import { isLargeValueMarker, resolveLarge, withValuesResolved } from "../eventstore/large-values.js";
import { A2AError, ErrorCode, invalidParams, taskNotFound, toA2AError, unsupported } from "./errors.js";
import { deltaOf, inputOfMessage, resumeOfMessage, type GraphInput } from "./parts.js";
import { artifactsOf, stateNeedsTerminal, statusOf, taskOf, taskStateOf } from "./task-view.js";
import { TASK_ID_KEY, type TaskIndex } from "./task-index.js";
import type { GraphInputShape } from "./card.js";
import {
  TERMINAL_STATES,
  type ListParams,
  type PushConfigInput,
  type SendParams,
  type StreamEvent,
  type Task,
  type TaskPage,
  type TaskState,
} from "./types.js";
import type { ProtocolVersion } from "./jsonrpc.js";
import { newTimeOrderedId } from "../util/new-id.js";

/** Most tasks a ListTasks filtered by state or time looks at (it reads each one's state). */
const MAX_SCAN = 10_000;
const SCAN_BATCH = 200;

export interface StreamItem {
  event: StreamEvent;
  /** The run stream revision it came from (the SSE id). */
  revision?: bigint;
}

/** A task's current run as a task view needs it: the read model's view and its terminal event. */
export interface TaskRun {
  view: RunView;
  /** The terminal event with its values resolved; undefined while the run has not ended. */
  ended: RunEnded | undefined;
  /** The A2A task id: the run id, or the first run's id for a task resumed by later runs. */
  taskId: string;
}

type Headers = Record<string, string | string[] | undefined>;

/** Whether the user may see a task's run (custom auth's filters); absent: every task is visible. */
export type Visible = (run: RunRecord) => Promise<boolean>;

/** Who sends a message (the run is authorized for them), and which tasks they may name. */
export interface SendAccess {
  caller: Caller;
  /** Which tasks a follow-up message may name (`threads:read`): another user's task is not found. */
  visible?: Visible;
}

export class A2AService {
  private readonly shapes = new Map<string, Promise<GraphInputShape>>();

  constructor(
    private readonly ctx: AppContext,
    private readonly runs: RunsService,
    private readonly index: TaskIndex,
  ) {}

  /**
   * The assistant of `/a2a/{assistant_id}` (a UUID or a graph id) as the caller may read it:
   * custom auth's `assistants:read` runs, as on GET /assistants/{id}. Unknown, or hidden by its
   * filters → -32602 (the same error: existence is not revealed); the handler's refusal → its error.
   */
  async assistant(idOrGraph: string, caller: Caller): Promise<Assistant> {
    const missing = () => invalidParams(`Assistant '${idOrGraph}' not found`);
    try {
      if (await assistantHidden(this.ctx, caller, idOrGraph)) throw missing();
      return await getAssistant(this.ctx, idOrGraph);
    } catch (error) {
      const e = toA2AError(error, "assistant");
      throw e.code === ErrorCode.InvalidParams ? missing() : e;
    }
  }

  /** What the graph's input takes (cached per graph: schemas do not change while the server runs). */
  graphShape(graphId: string): Promise<GraphInputShape> {
    let shape = this.shapes.get(graphId);
    if (!shape) {
      shape = this.ctx
        .runtime()
        .then(({ graphs }) => graphs.schemas(graphId))
        .then(({ input_schema, state_schema }) => {
          const schema = (input_schema ?? state_schema ?? {}) as { properties?: Record<string, unknown>; required?: string[] };
          const properties = Object.keys(schema.properties ?? {}).sort();
          return { acceptsMessages: properties.includes("messages"), properties, required: schema.required ?? [] };
        });
      shape.catch(() => this.shapes.delete(graphId));
      this.shapes.set(graphId, shape);
    }
    return shape;
  }

  /**
   * The run's terminal event from its log (the read model keeps only the status), values
   * resolved; and a large input resolved, for the history of a task that has not ended.
   */
  private async load(view: RunView, taskId: string): Promise<TaskRun> {
    let ended: RunEnded | undefined;
    if (view.stream.ended) {
      const terminal = await this.runs.lifecycle.terminalEvent(view.run.run_id);
      ended = terminal && (await withValuesResolved(this.ctx.store, terminal));
    }
    const input = view.run.kwargs.input;
    if (!ended && isLargeValueMarker(input)) {
      view = { ...view, run: { ...view.run, kwargs: { ...view.run.kwargs, input: await resolveLarge(this.ctx.store, input) } } };
    }
    return { view, ended, taskId };
  }

  /**
   * The run that holds a task now (its first run, or the newest run that resumed it) and the
   * task's state, reading the run's log only when the read model's view cannot tell the state.
   */
  private async locate(assistant: Assistant, taskId: string, visible?: Visible): Promise<{ view: RunView; taskId: string; state: TaskState }> {
    const first = isUuid(taskId) ? this.runs.view(taskId) : undefined;
    // A run that resumed a task is part of that task, not a task of its own.
    if (!first || first.run.assistant_id !== assistant.assistant_id || first.run.metadata[TASK_ID_KEY] !== undefined) throw taskNotFound(taskId);
    // Custom auth: a task the user may not see is not found (its existence is not revealed).
    if (visible && !(await visible(first.run))) throw taskNotFound(taskId);
    const stateOf = async (v: RunView) => taskStateOf(v, stateNeedsTerminal(v) ? await this.runs.lifecycle.terminalEvent(v.run.run_id) : undefined);
    const state = await stateOf(first);
    // Only a task that waited for input can have been resumed by a later run.
    if (state !== "input-required") return { view: first, taskId, state };
    const latest = this.index.latestContinuation({ assistantId: assistant.assistant_id, contextId: first.run.thread_id }, taskId);
    const view = latest ? this.runs.view(latest.run_id) : undefined;
    return view ? { view, taskId, state: await stateOf(view) } : { view: first, taskId, state };
  }

  /** A task's current run with its terminal event. */
  async resolve(assistant: Assistant, taskId: string, visible?: Visible): Promise<TaskRun> {
    const { view, taskId: id } = await this.locate(assistant, taskId, visible);
    return this.load(view, id);
  }

  /** Starts the run of a message: a new task on its context, or the resumption of a task waiting for input. */
  async start(assistant: Assistant, p: SendParams, headers: Headers, streaming: boolean, protocol: ProtocolVersion, access: SendAccess): Promise<TaskRun> {
    if (p.pushConfig) this.assertPushAllowed(p.pushConfig.url);
    const message = p.message;
    let threadId: string;
    let plan: GraphInput;
    let taskId: string | undefined;
    if (message.taskId) {
      const resolved = await this.resolve(assistant, message.taskId, access.visible);
      const state = taskStateOf(resolved.view, resolved.ended);
      if (TERMINAL_STATES.has(state)) {
        throw unsupported(
          `Task '${message.taskId}' is ${state}: a terminal task takes no more messages; send one without taskId to start a new task in its context`,
        );
      }
      if (state !== "input-required") throw unsupported(`Task '${message.taskId}' is still ${state}; wait for it to end or cancel it`);
      threadId = resolved.view.run.thread_id;
      if (message.contextId && message.contextId !== threadId) {
        throw invalidParams(`contextId '${message.contextId}' is not the context of task '${message.taskId}' (${threadId})`);
      }
      taskId = resolved.taskId;
      plan = resumeOfMessage(message, p.command);
    } else {
      const contextId = message.contextId ?? p.threadId;
      if (contextId !== undefined && !isUuid(contextId)) throw invalidParams(`contextId must be a UUID (it names a thread), got '${contextId}'`);
      threadId = contextId ?? newTimeOrderedId();
      const shape = await this.graphShape(assistant.graph_id);
      plan = p.command?.resume !== undefined ? resumeOfMessage(message, p.command) : inputOfMessage(message, shape.acceptsMessages, assistant.assistant_id);
    }
    const metadata: JsonObject = {};
    // Always a kept thread (the context), never a temporary one: a temporary thread's runs leave
    // the read model when they end, and tasks/get must find the task afterwards.
    const request: RunRequest = {
      assistant_id: assistant.assistant_id,
      if_not_exists: "create",
      metadata,
      // A stream shows the reply as it is produced (AI message chunks); a send needs only the end.
      stream_mode: streaming ? ["messages-tuple"] : ["values"],
    };
    if (plan.input) request.input = plan.input;
    if (plan.command) request.command = plan.command;
    let authorized: AuthorizedRun;
    try {
      // Custom auth: `threads:create_run` as on POST /threads/{id}/runs; a hidden context of a task is the task not found.
      authorized = await this.runs.authorize(access.caller, threadId, request);
    } catch (error) {
      throw toA2AError(error, taskId ? "task" : "thread");
    }
    if (taskId) authorized = { ...authorized, request: { ...authorized.request, metadata: { ...authorized.request.metadata, [TASK_ID_KEY]: taskId } } };
    let runId = authorized.runId;
    // The config is in the log before the run exists, so that no end of the run can precede it.
    if (p.pushConfig) await this.writePushConfig(taskId ?? runId, runId, p.pushConfig, protocol);
    try {
      runId = (await this.runs.create(authorized, headers)).run_id;
    } catch (error) {
      throw toA2AError(error, "thread");
    }
    const view = this.runs.view(runId);
    if (!view) throw new A2AError(ErrorCode.Internal, `run ${runId} vanished after it was created`);
    return this.load(view, taskId ?? runId);
  }

  /** The task once its run ended (or the client left / the server stops: as it is then). */
  async settled(runId: string, taskId: string, historyLength: number | undefined, signal?: AbortSignal): Promise<Task> {
    await this.runs.lifecycle.waitShown(runId, signal);
    const view = this.runs.view(runId);
    if (!view) throw taskNotFound(taskId);
    const run = await this.load(view, taskId);
    return taskOf(run.view, run.ended, { taskId, historyLength });
  }

  async get(assistant: Assistant, taskId: string, historyLength: number | undefined, visible?: Visible): Promise<Task> {
    const run = await this.resolve(assistant, taskId, visible);
    return taskOf(run.view, run.ended, { taskId: run.taskId, historyLength });
  }

  async cancel(assistant: Assistant, taskId: string, visible?: Visible): Promise<Task> {
    const { view, ended } = await this.resolve(assistant, taskId, visible);
    const state = taskStateOf(view, ended);
    if (TERMINAL_STATES.has(state) || state === "input-required") {
      throw new A2AError(ErrorCode.TaskNotCancelable, `Task '${taskId}' is ${state} and cannot be canceled`);
    }
    try {
      await this.runs.cancel(null, view.run.run_id, "interrupt");
    } catch (error) {
      throw toA2AError(error, "task");
    }
    const task = await this.settled(view.run.run_id, taskId, undefined);
    if (task.status.state !== "canceled") {
      throw new A2AError(ErrorCode.TaskNotCancelable, `Task '${taskId}' ended as ${task.status.state} before it could be canceled`);
    }
    return task;
  }

  /** ListTasks: the tasks of a context (or of the assistant), newest first, `pageToken` = offset. */
  async list(assistant: Assistant, p: ListParams, visibleRuns?: SqlFragment[]): Promise<TaskPage> {
    const scope = { assistantId: assistant.assistant_id, contextId: p.contextId, ...(visibleRuns ? { extra: visibleRuns } : {}) };
    const options = (taskId: string) => ({ taskId, historyLength: p.historyLength, includeArtifacts: p.includeArtifacts });
    const after = p.statusTimestampAfter ? Date.parse(p.statusTimestampAfter) : undefined;
    const found = async <T>(find: () => Promise<T>): Promise<T | undefined> => {
      try {
        return await find();
      } catch (error) {
        if (error instanceof A2AError && error.code === ErrorCode.TaskNotFound) return undefined; // removed meanwhile
        throw error;
      }
    };
    let ids: string[] = [];
    let total = 0;
    if (p.state === undefined && after === undefined) {
      // Unfiltered: the page and the count straight from SQL.
      total = this.index.countTasks(scope);
      ids = this.index.tasks(scope, { limit: p.pageSize, offset: p.offset }).map((r) => r.run_id);
    } else {
      // Filtered on the task's state or time: each task's state is needed, so scan (bounded).
      for (let offset = 0; offset < MAX_SCAN; offset += SCAN_BATCH) {
        const records = this.index.tasks(scope, { limit: SCAN_BATCH, offset });
        for (const record of records) {
          const task = await found(() => this.locate(assistant, record.run_id));
          if (!task) continue;
          if (p.state && task.state !== p.state) continue;
          // The status timestamp (see statusOf): the read model keeps ended_at.
          if (after !== undefined && Date.parse(task.view.stream.ended?.ended_at ?? task.view.run.updated_at) <= after) continue;
          if (total >= p.offset && total < p.offset + p.pageSize) ids.push(task.taskId);
          total++;
        }
        if (records.length < SCAN_BATCH) break;
      }
    }
    const tasks: Task[] = [];
    for (const id of ids) {
      const run = await found(() => this.resolve(assistant, id));
      if (run) tasks.push(taskOf(run.view, run.ended, options(run.taskId)));
    }
    const next = p.offset + p.pageSize;
    return { tasks, nextPageToken: next < total ? String(next) : "", pageSize: tasks.length, totalSize: total };
  }

  /**
   * The events of a task's run, tailed from its log (after `from`): `working` once a worker has it,
   * the reply's text as it is produced (status messages, never the artifact), then the artifact
   * with the whole reply in one part and the final status.
   */
  async *events(runId: string, taskId: string, from: bigint | "start", signal: AbortSignal): AsyncGenerator<StreamItem> {
    const contextId = this.runs.view(runId)?.run.thread_id ?? "";
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
          ...(text === undefined
            ? {}
            : { message: { kind: "message", role: "agent", parts: [{ kind: "text", text }], messageId: `${taskId}-delta-${revision}`, taskId, contextId } }),
        },
      },
    });
    for await (const e of tailRun(this.ctx.store, runId, from, signal)) {
      if (e.type !== "RunClaimed" && e.type !== "RunOutput") continue;
      if (!working) {
        working = true;
        yield workingUpdate(e.revision);
      }
      if (isEvent(e, "RunOutput")) {
        const text = e.data.event === "messages" ? deltaOf(await chunkOf(this.ctx.store, e.data)) : undefined;
        if (text !== undefined) yield workingUpdate(e.revision, text);
      }
    }
    if (signal.aborted) return;
    await this.runs.lifecycle.waitShown(runId, signal);
    const view = this.runs.view(runId);
    if (!view || signal.aborted) return;
    yield* this.finalEvents(await this.load(view, taskId));
  }

  // ---- push notification configs (events on `a2a-push-{task_id}`, read from the webhooks read model)

  /** Push needs the webhook machinery (-32003 without it); the URL follows the webhook URL policy (-32602). */
  assertPushSupported(): void {
    if (this.ctx.langgraph.config.http.disable_webhooks) {
      throw new A2AError(ErrorCode.PushNotificationNotSupported, "Push notifications are not supported: webhooks are disabled (http.disable_webhooks)");
    }
  }

  private assertPushAllowed(url: string): void {
    this.assertPushSupported();
    const check = checkWebhookUrl(url, webhookUrlPolicyFor(this.ctx.langgraph.config.webhooks.url, this.ctx.config.devMode));
    if (!check.ok) throw invalidParams(check.detail);
  }

  private async writePushConfig(taskId: string, runId: string, input: PushConfigInput, protocol: ProtocolVersion): Promise<StoredPushConfig> {
    const config = { ...input, id: input.id ?? taskId };
    await setPushConfig(this.ctx, { taskId, runId, config, protocol });
    return { ...config, protocol };
  }

  /** Sets (or replaces, same id) a config of an existing task; the run holding the task now is notified when it ends. */
  async setPush(
    assistant: Assistant,
    taskId: string,
    input: PushConfigInput,
    protocol: ProtocolVersion,
    visible?: Visible,
  ): Promise<{ taskId: string; config: StoredPushConfig }> {
    this.assertPushAllowed(input.url);
    const { view, taskId: id } = await this.locate(assistant, taskId, visible);
    const runId = view.run.run_id;
    const config = await this.writePushConfig(id, runId, input, protocol);
    // The run was running when we looked; if its end reached the log before the config did, the
    // fold made no delivery for it (the read models are at our append now, so they tell).
    if (!view.stream.ended && this.runs.view(runId)?.stream.ended && !this.ctx.readModels.webhooks.get(pushDeliveryKey(runId, config.id))) {
      const ended = await this.runs.lifecycle.terminalEvent(runId);
      if (ended) await catchUpPushRunEnd(this.ctx, { taskId: id, runId, configId: config.id, ended });
    }
    return { taskId: id, config };
  }

  async listPush(assistant: Assistant, taskId: string, visible?: Visible): Promise<{ taskId: string; configs: StoredPushConfig[] }> {
    const { taskId: id } = await this.locate(assistant, taskId, visible);
    return { taskId: id, configs: this.ctx.readModels.webhooks.pushConfigs(id) };
  }

  /** One config: the one named, or (none named) the one named after the task, else the only one. */
  async getPush(assistant: Assistant, taskId: string, configId: string | undefined, visible?: Visible): Promise<{ taskId: string; config: StoredPushConfig }> {
    const { taskId: id, configs } = await this.listPush(assistant, taskId, visible);
    const config =
      configId !== undefined ? configs.find((c) => c.id === configId) : (configs.find((c) => c.id === id) ?? (configs.length === 1 ? configs[0] : undefined));
    if (!config) throw invalidParams(`Push notification config '${configId ?? id}' not found for task '${taskId}'`);
    return { taskId: id, config };
  }

  /** Deletes a config; deleting one that is not there is not an error (idempotent, as a2a-js). */
  async deletePush(assistant: Assistant, taskId: string, configId: string, visible?: Visible): Promise<void> {
    const { taskId: id, configs } = await this.listPush(assistant, taskId, visible);
    if (!configs.some((c) => c.id === configId)) return;
    await deletePushConfig(this.ctx, id, configId);
  }

  /** The closing events of an ended run: its artifact, then the status with `final: true`. */
  *finalEvents({ view, ended, taskId }: TaskRun): Generator<StreamItem> {
    const contextId = view.run.thread_id;
    const revision = typeof view.stream.revision === "bigint" ? view.stream.revision : undefined;
    for (const artifact of artifactsOf(view, ended, taskId)) {
      yield { revision, event: { kind: "artifact-update", taskId, contextId, artifact, append: false, lastChunk: true } };
    }
    yield { revision, event: { kind: "status-update", taskId, contextId, status: statusOf(view, ended, taskId), final: true } };
  }
}
