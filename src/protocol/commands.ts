/**
 * The commands of the thread streaming protocol (v2) that act on the thread: `run.start`,
 * `input.respond`, `state.get`, `agent.getTree`. Each answers a `success` or an `error` response;
 * failures of the application (custom auth, a missing assistant, a conflict) become protocol
 * errors here. Subscriptions belong to the transports (src/protocol/routes.ts, ws-session.ts).
 */
import type { AppContext } from "../app/context.js";
import type { RunsService } from "../app/runs.js";
import type { Caller } from "../app/auth/caller.js";
import { authorizeThread } from "../app/auth/guards.js";
import { AuthError } from "../app/auth/engine.js";
import { threadStateConsistent } from "../app/threads.js";
import { getThreadState } from "../app/thread-state.js";
import { refusalOf } from "../domain/errors.js";
import type { RunRequest } from "../domain/run-request.js";
import { MultitaskStrategySchema } from "../domain/run-record.js";
import { EVENTS_PER_LOG_EVENT, lifecycleOf, seqOf } from "./log-events.js";
import { filterOfParams } from "./subscription-params.js";

export interface ProtocolCommand {
  id: number;
  method: string;
  params?: Record<string, unknown>;
}

export type ErrorCode =
  | "invalid_argument"
  | "unknown_command"
  | "unknown_error"
  | "no_such_run"
  | "no_such_subscription"
  | "no_such_namespace"
  | "no_such_interrupt"
  | "no_such_checkpoint"
  | "permission_denied"
  | "not_supported";

export type ProtocolResponse =
  | { type: "success"; id: number; result: Record<string, unknown>; meta?: Record<string, unknown> }
  | { type: "error"; id: number | null; error: ErrorCode; message: string };

export const errorResponse = (id: number | null, error: ErrorCode, message: string): ProtocolResponse => ({ type: "error", id, error, message });

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** What the protocol's methods become in this server (the rest answer `not_supported` or `unknown_command`). */
const NOT_SUPPORTED = new Set(["input.inject", "state.listCheckpoints", "state.fork", "subscription.reconnect"]);

/** An application failure → the protocol error that names it. */
export function toProtocolError(id: number | null, error: unknown): ProtocolResponse {
  if (error instanceof AuthError) return errorResponse(id, "permission_denied", error.detail);
  const refusal = refusalOf(error);
  if (refusal) return errorResponse(id, "invalid_argument", refusal.message);
  return errorResponse(id, "unknown_error", error instanceof Error ? error.message : String(error));
}

export class ProtocolCommands {
  constructor(
    private readonly ctx: AppContext,
    private readonly runs: RunsService,
  ) {}

  /** Checks `threads:read` for the caller (a hidden thread is a 404, as on REST). */
  async authorizeRead(caller: Caller, threadId: string): Promise<void> {
    await authorizeThread(this.ctx, caller, "read", threadId, { thread_id: threadId });
  }

  async handle(caller: Caller, threadId: string, command: ProtocolCommand, headers: Record<string, string | string[] | undefined>): Promise<ProtocolResponse> {
    const params = isRecord(command.params) ? command.params : {};
    try {
      switch (command.method) {
        case "run.start":
          return await this.runStart(caller, threadId, command.id, params, headers);
        case "input.respond":
          return await this.inputRespond(caller, threadId, command.id, params, headers);
        case "state.get":
          return await this.stateGet(caller, threadId, command.id, params);
        case "agent.getTree":
          return await this.agentTree(caller, threadId, command.id);
        case "subscription.subscribe":
          return await this.subscribeOverHttp(caller, threadId, command.id, params);
        case "subscription.unsubscribe":
          return typeof params.subscription_id === "string"
            ? errorResponse(command.id, "no_such_subscription", `Unknown subscription: ${params.subscription_id}`)
            : errorResponse(command.id, "invalid_argument", "subscription.unsubscribe requires a subscription_id.");
        default:
          if (NOT_SUPPORTED.has(command.method)) return errorResponse(command.id, "not_supported", `${command.method} is not supported by this server.`);
          return errorResponse(command.id, "unknown_command", `Unknown protocol command: ${command.method}`);
      }
    } catch (error) {
      return toProtocolError(command.id, error);
    }
  }

  /** The thread's latest run (the runs read model), or undefined on a thread no run was started on. */
  private latestRun(threadId: string) {
    return this.ctx.readModels.runs.listForThread(threadId, { limit: 1, offset: 0 })[0];
  }

  /** The seq of the last event in the log: what a command just did is applied through it. */
  private async appliedThrough(threadId: string): Promise<Record<string, unknown>> {
    return { thread_id: threadId, applied_through_seq: seqOf(await this.ctx.store.headPosition(), EVENTS_PER_LOG_EVENT - 1) };
  }

  /** Whether the thread waits for answers to interrupts (then run.start's input resumes it). */
  private async interrupted(threadId: string): Promise<boolean> {
    const thread = (await threadStateConsistent(this.ctx, threadId))?.thread;
    return !!thread && Object.keys(thread.interrupts ?? {}).length > 0;
  }

  private async startRun(caller: Caller, threadId: string, request: RunRequest, headers: Record<string, string | string[] | undefined>) {
    // The run records the protocol's events; its thread is made on first use, as the official server does.
    const full: RunRequest = { ...request, stream_mode: ["protocol"], if_not_exists: "create" };
    return this.runs.create(await this.runs.authorize(caller, threadId, full), headers);
  }

  private async runStart(
    caller: Caller,
    threadId: string,
    id: number,
    params: Record<string, unknown>,
    headers: Record<string, string | string[] | undefined>,
  ): Promise<ProtocolResponse> {
    if (typeof params.assistant_id !== "string" || params.assistant_id === "")
      return errorResponse(id, "invalid_argument", "run.start requires an assistant_id.");
    const strategy = MultitaskStrategySchema.safeParse(params.multitaskStrategy ?? params.multitask_strategy);
    const input = params.input ?? null;
    const resume = input !== null && (await this.interrupted(threadId));
    const request: RunRequest = {
      assistant_id: params.assistant_id,
      ...(resume ? { command: { resume: input } } : { input }),
      ...(isRecord(params.config) ? { config: params.config } : {}),
      ...(isRecord(params.metadata) ? { metadata: params.metadata as never } : {}),
      multitask_strategy: strategy.success ? strategy.data : "enqueue",
    };
    const run = await this.startRun(caller, threadId, request, headers);
    return { type: "success", id, result: { run_id: run.run_id }, meta: await this.appliedThrough(threadId) };
  }

  /**
   * The thread's state for answering an interrupt. A client answers as soon as the run's stream shows its end
   * (input.requested); the thread learns of that end from the RunFinished mark appended just after, which may
   * not be folded yet: when the head run has ended but its thread was not told, wait for that mark.
   */
  private async interruptedThreadState(threadId: string) {
    const state = await threadStateConsistent(this.ctx, threadId);
    const head = state?.activeRuns[0];
    if (!state || Object.keys(state.thread.interrupts ?? {}).length > 0 || head === undefined) return state;
    const view = this.runs.view(head);
    if (!view?.stream.ended || view.threadFinished) return state;
    await this.runs.lifecycle.waitDone(head);
    return threadStateConsistent(this.ctx, threadId);
  }

  /** Answers interrupts: `{interrupt_id, response}` or `{responses: [...]}`, resumed in one run of the thread's assistant. */
  private async inputRespond(
    caller: Caller,
    threadId: string,
    id: number,
    params: Record<string, unknown>,
    headers: Record<string, string | string[] | undefined>,
  ): Promise<ProtocolResponse> {
    const resume: Record<string, unknown> = {};
    if (Array.isArray(params.responses)) {
      for (const entry of params.responses) {
        if (!isRecord(entry) || typeof entry.interrupt_id !== "string")
          return errorResponse(id, "invalid_argument", "input.respond responses entries require an interrupt_id.");
        resume[entry.interrupt_id] = entry.response;
      }
      if (Object.keys(resume).length === 0) return errorResponse(id, "invalid_argument", "input.respond requires at least one response.");
    } else if (typeof params.interrupt_id === "string") {
      resume[params.interrupt_id] = params.response;
    } else {
      return errorResponse(id, "invalid_argument", "input.respond requires an interrupt_id.");
    }
    // What follows answers from the thread's state: only to a caller who may read it (another user's thread is not found, as on REST).
    await this.authorizeRead(caller, threadId);
    const thread = (await this.interruptedThreadState(threadId))?.thread;
    const last = thread && this.latestRun(threadId);
    // As the official server: a thread no run was started on has nothing to answer; one whose run is not waiting is a misuse.
    if (!thread || !last) return errorResponse(id, "no_such_run", "No interrupted run is bound to this thread.");
    if (Object.keys(thread.interrupts ?? {}).length === 0)
      return errorResponse(id, "invalid_argument", "input.respond can only be used while the run is interrupted.");
    const command: NonNullable<RunRequest["command"]> = { resume };
    if (isRecord(params.update) || Array.isArray(params.update)) command.update = params.update;
    if (params.goto !== undefined) command.goto = params.goto;
    const request: RunRequest = {
      assistant_id: last.assistant_id,
      command,
      ...(isRecord(params.config) ? { config: params.config } : {}),
      ...(isRecord(params.metadata) ? { metadata: params.metadata as never } : {}),
      multitask_strategy: "enqueue",
    };
    await this.startRun(caller, threadId, request, headers);
    return { type: "success", id, result: {}, meta: await this.appliedThrough(threadId) };
  }

  private async stateGet(caller: Caller, threadId: string, id: number, params: Record<string, unknown>): Promise<ProtocolResponse> {
    await this.authorizeRead(caller, threadId);
    if (!(await threadStateConsistent(this.ctx, threadId))) return errorResponse(id, "invalid_argument", `Thread with ID ${threadId} not found`);
    const state = (await getThreadState(this.ctx, caller, threadId)) as {
      values?: unknown;
      checkpoint?: { checkpoint_id?: string; checkpoint_ns?: string } | null;
    };
    let values = isRecord(state.values) ? state.values : {};
    const keys = Array.isArray(params.keys) && params.keys.every((k) => typeof k === "string") ? (params.keys as string[]) : undefined;
    if (keys) values = Object.fromEntries(Object.entries(values).filter(([k]) => keys.includes(k)));
    const cp = state.checkpoint;
    const result: Record<string, unknown> = { values };
    if (cp?.checkpoint_id) result.checkpoint = { id: cp.checkpoint_id, ...(cp.checkpoint_ns ? { ns: cp.checkpoint_ns } : {}) };
    return { type: "success", id, result, meta: await this.appliedThrough(threadId) };
  }

  /**
   * `subscription.subscribe` on POST /commands: the params are checked as on a WebSocket, and a thread no
   * run was started on has nothing to subscribe to (as the official server answers). Events are delivered
   * on the WebSocket or the SSE request of /stream/events, not in an HTTP response: said as not_supported.
   */
  private async subscribeOverHttp(caller: Caller, threadId: string, id: number, params: Record<string, unknown>): Promise<ProtocolResponse> {
    const filter = filterOfParams(params);
    if (typeof filter === "string") return errorResponse(id, "invalid_argument", filter);
    await this.authorizeRead(caller, threadId);
    if (!this.latestRun(threadId)) return errorResponse(id, "no_such_run", "No active run is bound to this thread.");
    return errorResponse(
      id,
      "not_supported",
      `Subscribe over GET /threads/${threadId}/stream/events (WebSocket) or POST /threads/${threadId}/stream/events (SSE).`,
    );
  }

  /** The root of the agent tree: the thread's latest run and its status (a thread without runs has none). */
  private async agentTree(caller: Caller, threadId: string, id: number): Promise<ProtocolResponse> {
    await this.authorizeRead(caller, threadId);
    const last = this.latestRun(threadId);
    if (!last) return errorResponse(id, "no_such_run", "No active run is bound to this thread.");
    const graphId = (last?.kwargs.config as { configurable?: { graph_id?: unknown } } | undefined)?.configurable?.graph_id;
    const status =
      last.status === "pending" || last.status === "running"
        ? "running"
        : last.status === "error" || last.status === "timeout"
          ? "failed"
          : lifecycleOf(last.status as never);
    return { type: "success", id, result: { tree: { namespace: [], status, graph_name: typeof graphId === "string" ? graphId : last.assistant_id } } };
  }
}
