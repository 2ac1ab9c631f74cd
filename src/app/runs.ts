import { v7 as uuidv7, validate as isUuid } from "uuid";
import type { AppContext } from "./context.js";
import { execute } from "./commands.js";
import { findAssistant } from "./assistants.js";
import { createThread, threadState } from "./threads.js";
import { defaultAssistantId } from "../runtime/graphs.js";
import { threadsProjection } from "../../projections/threads.js";
import { runsProjection, threadRunsProjection } from "../../projections/runs.js";
import { decideEnqueueRun, threadStream } from "../domain/threads.js";
import { decideCancel, publicRun, runStream, type CancelAction, type RunView } from "../domain/runs.js";
import type { MultitaskStrategy, RunRecord, RunStatus } from "../domain/run-record.js";
import { isPlainObject, type JsonObject } from "../domain/json.js";
import { WrongExpectedVersionError, type RecordedEvent } from "../eventstore/types.js";
import { HttpError } from "../http/errors.js";
import { completeOnThread, type CompletionDeps } from "../runtime/run-completion.js";

/** A run request as the routes validated it (snake_case, as on the wire). */
export interface RunRequest {
  assistant_id: string;
  input?: unknown;
  command?: { resume?: unknown; update?: unknown; goto?: unknown } | null;
  config?: JsonObject;
  context?: JsonObject;
  metadata?: JsonObject;
  stream_mode?: string | string[];
  stream_subgraphs?: boolean;
  stream_resumable?: boolean;
  interrupt_before?: "*" | string[];
  interrupt_after?: "*" | string[];
  multitask_strategy?: MultitaskStrategy;
  if_not_exists?: "reject" | "create";
  on_completion?: "delete" | "keep";
  on_disconnect?: "cancel" | "continue";
  after_seconds?: number;
  checkpoint_id?: string;
  checkpoint?: { checkpoint_id?: string; checkpoint_ns?: string; checkpoint_map?: JsonObject | null };
  webhook?: string;
  feedback_keys?: string[];
}

/** Request headers that go into `configurable` (as both official servers do). */
const HIDDEN_HEADERS = new Set(["x-api-key", "x-tenant-id", "x-service-key"]);
export function configurableHeaders(headers: Record<string, string | string[] | undefined>): JsonObject {
  const out: JsonObject = {};
  for (const [k, v] of Object.entries(headers)) {
    if (typeof v !== "string") continue;
    if ((k.startsWith("x-") && !HIDDEN_HEADERS.has(k)) || k === "user-agent") out[k] = v;
  }
  return out;
}

const obj = (v: unknown): JsonObject => (isPlainObject(v) ? v : {});

/** The result a finished run reports to /wait and /join. */
export function runResult(view: RunView | undefined): unknown {
  const ended = view?.stream.ended;
  if (!ended) return {};
  if (ended.error && ended.status !== "interrupted") return { __error__: ended.error };
  if (ended.status === "interrupted" && ended.interrupts && Object.keys(ended.interrupts).length) {
    const all = Object.values(ended.interrupts).flatMap((v) => (Array.isArray(v) ? v : []));
    if (all.length) return { ...obj(ended.values), __interrupt__: all };
  }
  return ended.values ?? {};
}

/** Application service of runs: create (with double-texting), read, cancel, delete, wait. */
export class RunsService {
  private readonly waiters = new Map<string, (() => void)[]>();
  /** Open streams and waits, ended when the server shuts down. */
  private readonly open = new Set<() => void>();
  private readonly unsubscribe: () => void;

  constructor(
    private readonly ctx: AppContext,
    private readonly completion: CompletionDeps,
  ) {
    this.unsubscribe = ctx.runner.onApplied((event) => this.onEvent(event));
  }

  /** Registers something to end at shutdown; returns the function that unregisters it. */
  track(end: () => void): () => void {
    this.open.add(end);
    return () => this.open.delete(end);
  }

  private closed = false;

  close(): void {
    this.closed = true;
    this.unsubscribe();
    for (const end of [...this.open]) end();
    this.open.clear();
    for (const list of this.waiters.values()) for (const wake of list) wake();
    this.waiters.clear();
  }

  private onEvent(event: RecordedEvent): void {
    if (this.waiters.size === 0 || !event.streamId.startsWith("thread-")) return;
    if (event.type !== "RunFinished" && event.type !== "RunDeleted" && event.type !== "ThreadDeleted") return;
    for (const [runId, list] of this.waiters) {
      if (!this.isDone(runId)) continue;
      this.waiters.delete(runId);
      for (const wake of list) wake();
    }
  }

  view(runId: string): RunView | undefined {
    return this.ctx.runner.get(runsProjection, runId.toLowerCase());
  }

  /** Whether the run is over as far as its thread is concerned (or gone); a temporary thread is deleted by then. */
  isDone(runId: string): boolean {
    const v = this.view(runId);
    if (!v) return true;
    if (!v.threadFinished) return false;
    return !v.run.kwargs.temporary || !threadState(this.ctx, v.run.thread_id);
  }

  /** Resolves once the run ended and its thread shows it (or the run is gone). */
  waitDone(runId: string, signal?: AbortSignal): Promise<RunView | undefined> {
    const id = runId.toLowerCase();
    if (this.closed || this.isDone(id) || signal?.aborted) return Promise.resolve(this.view(id));
    return new Promise((resolve) => {
      const wake = () => resolve(this.view(id));
      const list = this.waiters.get(id) ?? [];
      list.push(wake);
      this.waiters.set(id, list);
      signal?.addEventListener("abort", wake, { once: true });
    });
  }

  private assistantOf(idOrGraph: string) {
    const id = isUuid(idOrGraph) ? idOrGraph.toLowerCase() : this.ctx.graphs.has(idOrGraph) ? defaultAssistantId(idOrGraph) : undefined;
    const assistant = id ? findAssistant(this.ctx, id) : undefined;
    if (!assistant) {
      throw new HttpError(404, `No assistant found for "${idOrGraph}". Make sure the assistant ID is for a valid assistant or a valid graph ID.`);
    }
    return assistant;
  }

  /** Creates a run on a thread (threadId) or on a new temporary thread (stateless, threadId null). */
  async create(threadId: string | null, req: RunRequest, headers: Record<string, string | string[] | undefined> = {}): Promise<RunRecord> {
    const ctx = this.ctx;
    const assistant = this.assistantOf(req.assistant_id);
    const stateless = threadId === null;
    let tid: string;
    if (stateless) {
      tid = (await createThread(ctx, { metadata: {}, if_exists: "raise" })).thread_id;
    } else {
      tid = threadId.toLowerCase();
      if (!threadState(ctx, tid)) {
        if (req.if_not_exists !== "create") throw new HttpError(404, `Thread with ID ${threadId} not found`);
        await createThread(ctx, { thread_id: tid, metadata: {}, if_exists: "do_nothing" });
      }
    }
    const thread = threadState(ctx, tid)!.thread;
    const runId = uuidv7();
    const now = ctx.now();
    const request = obj(req.config);
    const configurable: JsonObject = {
      ...obj(assistant.config.configurable),
      ...obj(thread.config.configurable),
      ...configurableHeaders(headers),
      ...obj(request.configurable),
    };
    if (req.checkpoint_id) configurable.checkpoint_id = req.checkpoint_id;
    if (req.checkpoint) {
      for (const [k, v] of Object.entries(req.checkpoint)) if (v !== undefined && v !== null) configurable[k] = v;
    }
    Object.assign(configurable, { run_id: runId, thread_id: tid, graph_id: assistant.graph_id, assistant_id: assistant.assistant_id });
    const metadata = { ...obj(req.metadata) };
    const config: JsonObject = { ...assistant.config, ...thread.config, ...request, configurable, metadata: { ...obj(request.metadata), ...metadata } };
    const streamMode = req.stream_mode === undefined ? ["values"] : Array.isArray(req.stream_mode) ? req.stream_mode : [req.stream_mode];
    const afterMs = Math.max(0, (req.after_seconds ?? 0) * 1000);
    const createdAt = afterMs > 0 ? new Date(Date.parse(now) + afterMs).toISOString().replace("Z", "+00:00") : now;
    const kwargs: RunRecord["kwargs"] = {
      input: req.input ?? null,
      config,
      context: { ...assistant.context, ...obj(req.context) },
      stream_mode: streamMode,
      temporary: stateless && (req.on_completion ?? "delete") === "delete",
      subgraphs: req.stream_subgraphs ?? false,
      resumable: req.stream_resumable ?? false,
    };
    if (req.command !== undefined && req.command !== null) kwargs.command = req.command;
    if (req.interrupt_before !== undefined) kwargs.interrupt_before = req.interrupt_before;
    if (req.interrupt_after !== undefined) kwargs.interrupt_after = req.interrupt_after;
    if (req.webhook !== undefined) kwargs.webhook = req.webhook;
    if (req.feedback_keys !== undefined) kwargs.feedback_keys = req.feedback_keys;
    if (req.on_disconnect !== undefined) kwargs.on_disconnect = req.on_disconnect;
    if (afterMs > 0) kwargs.not_before = createdAt;
    const run: RunRecord = {
      run_id: runId,
      thread_id: tid,
      assistant_id: assistant.assistant_id,
      created_at: createdAt,
      updated_at: createdAt,
      status: "pending",
      metadata: { ...assistant.metadata, ...thread.metadata, ...metadata },
      multitask_strategy: req.multitask_strategy ?? "enqueue",
      kwargs,
    };
    const stamp = { graph_id: assistant.graph_id, assistant_id: assistant.assistant_id };
    const { decision } = await execute(ctx, threadsProjection, tid, threadStream(tid), (s) => decideEnqueueRun(s && !s.deleted ? s : undefined, run, stamp));
    const action: CancelAction | undefined = decision.strategy === "rollback" ? "rollback" : decision.strategy === "interrupt" ? "interrupt" : undefined;
    if (action) {
      // A run that ended (or was removed) meanwhile needs no cancelling.
      const gone = (error: unknown) => {
        if (!(error instanceof HttpError && error.statusCode === 404)) throw error;
      };
      await Promise.all(decision.cancel.map((id) => this.cancel(tid, id, action).catch(gone)));
    }
    return run;
  }

  get(threadId: string | null, runId: string): RunRecord {
    const v = this.view(runId);
    if (!v || (threadId !== null && v.run.thread_id !== threadId.toLowerCase())) throw new HttpError(404, "Run not found");
    if (threadId !== null && !threadState(this.ctx, threadId)) throw new HttpError(404, "Run not found");
    return publicRun(v);
  }

  list(threadId: string, q: { limit: number; offset: number; status?: RunStatus }): RunRecord[] {
    if (!threadState(this.ctx, threadId)) throw new HttpError(404, `Thread with ID ${threadId} not found`);
    const ids = this.ctx.runner.get(threadRunsProjection, threadId.toLowerCase()) ?? [];
    const runs: RunRecord[] = [];
    for (let i = ids.length - 1; i >= 0; i--) {
      const v = this.view(ids[i]);
      if (!v) continue;
      const r = publicRun(v);
      if (q.status === undefined || r.status === q.status) runs.push(r);
    }
    return runs.slice(q.offset, q.offset + q.limit);
  }

  /** Cancels one run: a pending one ends now, a running one is aborted by its worker. */
  async cancel(threadId: string | null, runId: string, action: CancelAction): Promise<void> {
    const id = runId.toLowerCase();
    for (let attempt = 0; ; attempt++) {
      const v = this.view(id);
      if (!v || (threadId !== null && v.run.thread_id !== threadId.toLowerCase())) throw new HttpError(404, "Run not found");
      const decision = decideCancel(v.stream, action, this.ctx.now());
      if (decision.events.length === 0) return;
      try {
        const expected = v.stream.owner ? "any" : v.stream.revision;
        const result = await this.ctx.store.append(runStream(id), decision.events, expected);
        await this.ctx.runner.waitFor(result.position);
      } catch (error) {
        if (!(error instanceof WrongExpectedVersionError) || attempt >= 5) throw error;
        await this.ctx.runner.waitFor(await this.ctx.store.headPosition());
        continue;
      }
      if (decision.endsNow) await completeOnThread(this.completion, v.run, decision.endsNow, undefined);
      return;
    }
  }

  /** Cancels runs by ids on a thread, or every run with a status (POST /runs/cancel). */
  async cancelMany(q: { thread_id?: string; run_ids?: string[]; status?: "pending" | "running" | "all" }, action: CancelAction): Promise<number> {
    let targets: RunView[];
    if (q.run_ids) {
      targets = q.run_ids.map((id) => this.view(id)).filter((v): v is RunView => !!v && (!q.thread_id || v.run.thread_id === q.thread_id.toLowerCase()));
    } else {
      targets = this.ctx.runner.values(runsProjection).filter((v) => {
        if (v.stream.ended) return false;
        const s = publicRun(v).status;
        return q.status === "all" || s === q.status;
      });
    }
    targets = targets.filter((v) => !v.stream.ended);
    await Promise.all(targets.map((v) => this.cancel(null, v.run.run_id, action)));
    return targets.length;
  }

  async delete(threadId: string, runId: string): Promise<void> {
    const v = this.view(runId);
    if (!v || v.run.thread_id !== threadId.toLowerCase()) throw new HttpError(404, "Run not found");
    if (!v.threadFinished) throw new HttpError(409, "Run is still active; cancel it before deleting it");
    const result = await this.ctx.store.append(threadStream(v.run.thread_id), [{ type: "RunDeleted", data: { run_id: v.run.run_id, deleted_at: this.ctx.now() } }], "any");
    await this.ctx.runner.waitFor(result.position);
  }

  /** Cancels the active runs of a thread that is being deleted. */
  async cancelThreadRuns(threadId: string): Promise<void> {
    const ids = this.ctx.runner.get(threadRunsProjection, threadId) ?? [];
    await Promise.all(ids.map((id) => this.view(id)).filter((v) => v && !v.stream.ended).map((v) => this.cancel(null, v!.run.run_id, "interrupt").catch(() => undefined)));
  }
}
