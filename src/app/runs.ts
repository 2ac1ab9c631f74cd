import { newTimeOrderedId } from "../util/new-id.js";
import type { AppContext } from "./context.js";
import { assertWebhookAllowed } from "./webhooks.js";
import { CATCH_UP_TIMEOUT_MS } from "../commands/pipeline.js";
import { createOnce, idempotencyKeyOf } from "./idempotent-create.js";
import { externalizeIfLarge } from "../eventstore/large-values.js";
import { assistantIdOf, findAssistantConsistent } from "./assistants.js";
import { createThread, threadState, threadStateConsistent } from "./threads.js";
import { decideEnqueueRun, threadStream, type Thread, type ThreadState } from "../domain/threads.js";
import {
  RUN_COMMAND_STREAM_PREFIX,
  RUN_INPUT_STREAM_PREFIX,
  decideCancel,
  publicRun,
  runStream,
  type CancelAction,
  type RunStreamState,
  type RunView,
} from "../domain/runs.js";
import type { RunRecord, RunStatus } from "../domain/run-record.js";
import type { RunRequest } from "../domain/run-request.js";
import { isPlainObject, type JsonObject } from "../domain/json.js";
import type { AppendTicket } from "../eventstore/types.js";
import { conflict, isNotFound, notFound } from "../domain/errors.js";
import { completeOnThread, loadRunStream, type CompletionDeps } from "../runtime/run-completion.js";
import type { AuthContext } from "./auth/engine.js";
import { RunLifecycle } from "./run-lifecycle.js";
import { isRestricted, type Caller } from "./auth/caller.js";
import { authorizeCreateRun } from "./auth/guards.js";
import { assistantHidden } from "./visible-assistants.js";
import { authConditions, type AuthFilters } from "../read-models/auth-filters.js";
import { configurableHeadersOf, DEFAULT_CONFIGURABLE_HEADERS } from "./configurable-headers.js";
import { currentRequestContext } from "../context/request-context.js";
import { assembleRun } from "../domain/run-assembly.js";

const AUTHORIZED = Symbol("authorized run");

/** A run's assistant that does not exist, or that its caller may not read (the same answer: existence is not revealed). */
export const unknownAssistant = (idOrGraph: string) =>
  notFound(`No assistant found for "${idOrGraph}". Make sure the assistant ID is for a valid assistant or a valid graph ID.`);

/** Told of a run enqueued at its thread's head, with the ticket of the enqueue's append (see RunsService.onHeadEnqueued). */
export type HeadListener = (run: RunRecord, enqueued: AppendTicket) => void;

/**
 * A run request that passed custom auth's `threads:create_run` for its caller, with the metadata
 * the handler left: the only form `RunsService.create` accepts, so whatever edge creates a run
 * (REST, A2A, crons, ...), the same handler has run.
 */
export interface AuthorizedRun {
  readonly [AUTHORIZED]: true;
  readonly threadId: string | null;
  readonly request: RunRequest;
  /** The id the handler was shown; the run gets it. */
  readonly runId: string;
  /** The authenticated user, whose identity the graph sees in `configurable`. */
  readonly auth?: AuthContext;
}

const obj = (v: unknown): JsonObject => (isPlainObject(v) ? v : {});

/** Runs whose thread the custom-auth `filters` let the user see, as a condition on the runs table. */
export function threadsOfRuns(filters: AuthFilters | undefined): { sql: string; params: unknown[] }[] {
  return authConditions(filters, "threads.metadata").map((c) => ({
    sql: `runs.thread_id IN (SELECT threads.thread_id FROM threads WHERE ${c.sql})`,
    params: c.params,
  }));
}

/** Application service of runs: create (with double-texting), read, cancel, delete, wait. */
export class RunsService {
  /** `http.configurable_headers` of langgraph.json, compiled once. */
  private readonly headersToConfigurable: ReturnType<typeof configurableHeadersOf>;
  /** Told of each run that becomes its thread's head when it is enqueued (see onHeadEnqueued). */
  private readonly headListeners = new Set<HeadListener>();

  /** Who waits for which run, and what they are answered (see run-lifecycle.ts). */
  readonly lifecycle: RunLifecycle;

  constructor(
    private readonly ctx: AppContext,
    private readonly completion: CompletionDeps,
  ) {
    this.headersToConfigurable = configurableHeadersOf(ctx.langgraph.config.http.configurable_headers ?? DEFAULT_CONFIGURABLE_HEADERS);
    this.lifecycle = new RunLifecycle(ctx);
  }

  /**
   * Calls `listener` with each run this process enqueues at the head of its thread (no run before
   * it), as soon as its append is issued, with that append's ticket: the local run worker claims it
   * at once, in an append that depends on the enqueue (written in the same commit on the embedded
   * store, never without it), instead of waiting for the read models to show it (they fold it only
   * once it is durable). Returns the unsubscribe function.
   */
  onHeadEnqueued(listener: HeadListener): () => void {
    this.headListeners.add(listener);
    return () => this.headListeners.delete(listener);
  }

  close(): void {
    this.lifecycle.close();
  }

  view(runId: string): RunView | undefined {
    return this.ctx.readModels.runs.load(runId);
  }

  private async assistantOf(idOrGraph: string) {
    const id = assistantIdOf(this.ctx, idOrGraph);
    const assistant = id ? await findAssistantConsistent(this.ctx, id) : undefined;
    if (!assistant) throw unknownAssistant(idOrGraph);
    return assistant;
  }

  /**
   * Runs `threads:create_run` for the caller (stateless runs too, as the official server): the
   * handler may add metadata (the run's, and a thread made for it) or hide the thread (404). Then
   * `assistants:read` on the run's assistant, as GET /assistants/{id} runs it: a run uses the
   * assistant's config and shows it to its caller (kwargs, the thread's state), so an assistant the
   * caller may not read is not found here either, with the very answer an unknown one gets.
   */
  async authorize(caller: Caller, threadId: string | null, request: RunRequest, runId: string = newTimeOrderedId()): Promise<AuthorizedRun> {
    let metadata = request.metadata;
    if (isRestricted(caller)) {
      metadata = await authorizeCreateRun(this.ctx, caller, threadId, request, runId);
      if (await assistantHidden(this.ctx, caller, request.assistant_id)) throw unknownAssistant(request.assistant_id);
    }
    return {
      [AUTHORIZED]: true,
      threadId,
      runId,
      request: metadata === request.metadata ? request : { ...request, metadata },
      ...(caller.auth ? { auth: caller.auth } : {}),
    };
  }

  /**
   * Creates an authorized run on its thread, or on a new temporary thread (stateless, threadId
   * null). With an `Idempotency-Key` (the header, or `options.idempotencyKey`, e.g. per item of a
   * batch), a retry with the same body returns the run the key created and starts nothing; see
   * idempotent-create.ts.
   */
  async create(
    authorized: AuthorizedRun,
    headers: Record<string, string | string[] | undefined> = {},
    options: { idempotencyKey?: string; forResult?: boolean } = {},
  ): Promise<RunRecord> {
    const key = options.idempotencyKey ?? idempotencyKeyOf(headers);
    const forResult = options.forResult === true;
    if (key === undefined) return this.createNow(authorized, headers, forResult);
    const deps = {
      store: this.ctx.store,
      commands: this.ctx.commands,
      findRun: async (runId: string) => {
        const v = this.view(runId);
        return v ? publicRun(v) : undefined;
      },
      now: () => this.ctx.now(),
      ttlMs: this.ctx.config.idempotencyKeyTtlSecs * 1000,
      inProgressWaitMs: CATCH_UP_TIMEOUT_MS,
    };
    const request = { key, identity: authorized.auth?.user.identity ?? "", threadId: authorized.threadId, body: authorized.request, runId: authorized.runId };
    return createOnce(deps, request, () => this.createNow(authorized, headers, forResult));
  }

  /**
   * `forResult`: the caller answers with the run's result only (a /wait), read from the log once the run's
   * end is durable; the run is returned once its enqueue is committed instead of once the read models show
   * it. Nobody then waits for the fold of the enqueue, which is put off until the run's end is durable too
   * (CatchUpRunner.start) and done in one transaction with it, after the answer: in a sequential wait the
   * enqueue's sync is reported only once the graph has run, and that fold came between the graph and the
   * answer. The caller passes the run to isDone and waitResult.
   */
  private async createNow(authorized: AuthorizedRun, headers: Record<string, string | string[] | undefined>, forResult = false): Promise<RunRecord> {
    const { threadId, request: req, auth } = authorized;
    const ctx = this.ctx;
    assertWebhookAllowed(ctx, req.webhook);
    const assistant = await this.assistantOf(req.assistant_id);
    const stateless = threadId === null;
    let thread: Thread;
    // The thread's state as found here, for the enqueue's first decision (no second read of the row).
    let loaded: { state: ThreadState | undefined } | undefined;
    if (stateless) {
      // A thread made for a run carries the run's metadata (its owner, when auth added one), as the official server.
      thread = await createThread(ctx, { metadata: obj(req.metadata), if_exists: "raise" });
    } else {
      const found = await threadStateConsistent(ctx, threadId);
      if (found) {
        thread = found.thread;
        loaded = { state: found };
      } else if (req.if_not_exists !== "create") throw notFound(`Thread with ID ${threadId} not found`);
      else thread = await createThread(ctx, { thread_id: threadId, metadata: obj(req.metadata), if_exists: "do_nothing" });
    }
    const tid = thread.thread_id;
    const runId = authorized.runId;
    const now = ctx.now();
    // Inputs too large for one event are written beside the run and referenced (resolved by the worker).
    const stored = {
      input: await externalizeIfLarge(ctx.store, RUN_INPUT_STREAM_PREFIX, runId, req.input ?? null),
      command:
        req.command === undefined || req.command === null ? undefined : await externalizeIfLarge(ctx.store, RUN_COMMAND_STREAM_PREFIX, runId, req.command),
    };
    const run = assembleRun({
      runId,
      threadId: tid,
      stateless,
      now,
      request: req,
      assistant,
      thread,
      headerConfigurable: this.headersToConfigurable(headers),
      auth,
      requestId: currentRequestContext()?.requestId,
      stored,
    });
    const stamp = { graph_id: assistant.graph_id, assistant_id: assistant.assistant_id };
    const atHead = (s: ThreadState | undefined, _decision: unknown, enqueued: AppendTicket) => {
      if (!s || s.activeRuns.length > 0) return;
      for (const listener of this.headListeners) {
        try {
          listener(run, enqueued);
        } catch (error) {
          // The run is in the log: it starts the usual way, once the read models show it.
          console.error(`run ${run.run_id}: early start failed: ${(error as Error).message}`);
        }
      }
    };
    const { decision } = await ctx.commands.decide({
      stream: threadStream(tid),
      load: () => ctx.readModels.threads.load(tid),
      loaded,
      decide: (s) => decideEnqueueRun(s && !s.deleted ? s : undefined, run, stamp),
      issued: atHead,
      // A /wait answers from the log once the run's end is durable: nobody waits for the enqueue's fold.
      waitFor: forResult ? "commit" : "fold",
    });
    // Before any fold can come: the fold of the enqueue needs its sync, reported in a later turn of the event loop.
    if (forResult) await this.lifecycle.createdForResult(run.run_id);
    const action: CancelAction | undefined = decision.strategy === "rollback" ? "rollback" : decision.strategy === "interrupt" ? "interrupt" : undefined;
    if (action) {
      // A run that ended (or was removed) meanwhile needs no cancelling.
      const gone = (error: unknown) => {
        if (!isNotFound(error)) throw error;
      };
      await Promise.all(decision.cancel.map((id) => this.cancel(tid, id, action).catch(gone)));
      if (action === "rollback") {
        // A started run ends once its worker has aborted it: the answer waits for that, so the
        // rolled-back runs are gone when the caller looks. Bounded: a run whose worker died goes
        // later, when its lease is taken over.
        const deadline = AbortSignal.timeout(CATCH_UP_TIMEOUT_MS);
        await Promise.all(decision.cancel.map((id) => this.lifecycle.waitDone(id, deadline)));
      }
    }
    return run;
  }

  /** The run as the API shows it; a miss catches up with its thread's stream first (another process may have created it). */
  async get(threadId: string | null, runId: string): Promise<RunRecord> {
    let v = this.view(runId);
    if (!v && threadId !== null) {
      await this.ctx.commands.catchUpWithStream(threadStream(threadId));
      v = this.view(runId);
    }
    if (!v || (threadId !== null && v.run.thread_id !== threadId)) throw notFound("Run not found");
    if (threadId !== null && !threadState(this.ctx, threadId)) throw notFound("Run not found");
    return publicRun(v);
  }

  /** A thread's runs; the custom-auth `filters` apply to the runs' thread (in the SQL query). */
  async list(threadId: string, q: { limit: number; offset: number; status?: RunStatus }, filters?: AuthFilters): Promise<RunRecord[]> {
    if (!(await threadStateConsistent(this.ctx, threadId))) throw notFound(`Thread with ID ${threadId} not found`);
    return this.ctx.readModels.runs.listForThread(threadId, { ...q, extra: threadsOfRuns(filters) });
  }

  /** Cancels one run: a pending one ends now, a running one is aborted by its worker. */
  async cancel(threadId: string | null, id: string, action: CancelAction): Promise<void> {
    const v = this.view(id);
    if (!v || (threadId !== null && v.run.thread_id !== threadId)) throw notFound("Run not found");
    // The read model's view first; after a conflict, the run stream itself (strongly consistent).
    // A claimed run's request is appended at any revision (its worker acts on it); an unclaimed one's
    // end expects the revision it was decided on, so that a claim in between wins.
    const expectedOf = (s: RunStreamState) => (s.owner ? "any" : s.revision);
    let decision = decideCancel(v.stream, action, this.ctx.now());
    if (decision.events.length === 0) return;
    const appended = await this.ctx.commands.append({
      stream: runStream(id),
      events: decision.events,
      expected: expectedOf(v.stream),
      waitFor: "fold",
      onConflict: {
        reconsider: async () => {
          const now = await loadRunStream(this.ctx.store, id);
          decision = decideCancel(now, action, this.ctx.now());
          return decision.events.length === 0 ? undefined : { events: decision.events, expected: expectedOf(now) };
        },
      },
    });
    if (appended && decision.endsNow) await completeOnThread(this.completion, v.run, decision.endsNow, undefined);
  }

  /** Cancels runs by ids on a thread, or every run with a status (POST /runs/cancel). */
  async cancelMany(
    q: { thread_id?: string; run_ids?: string[]; status?: "pending" | "running" | "all" },
    action: CancelAction,
    filters?: AuthFilters,
  ): Promise<number> {
    let targets: RunView[];
    if (q.run_ids) {
      targets = q.run_ids.map((id) => this.view(id)).filter((v): v is RunView => !!v && (!q.thread_id || v.run.thread_id === q.thread_id));
    } else {
      targets = this.ctx.readModels.runs.activeWithStatus(
        q.status === "all" || q.status === undefined ? ["pending", "running"] : [q.status],
        threadsOfRuns(filters),
      );
    }
    targets = targets.filter((v) => !v.stream.ended);
    await Promise.all(targets.map((v) => this.cancel(null, v.run.run_id, action)));
    return targets.length;
  }

  async delete(threadId: string, runId: string): Promise<void> {
    const v = this.view(runId);
    if (!v || v.run.thread_id !== threadId) throw notFound("Run not found");
    if (!v.threadFinished) throw conflict("Run is still active; cancel it before deleting it");
    await this.ctx.commands.append({
      stream: threadStream(v.run.thread_id),
      events: [{ type: "RunDeleted", data: { run_id: v.run.run_id, deleted_at: this.ctx.now() } }],
      expected: "any",
      waitFor: "fold",
    });
  }

  /** Cancels the active runs of a thread about to be deleted (its runs leave the read model with it). */
  async cancelThreadRuns(threadId: string): Promise<void> {
    const active = this.ctx.readModels.runs.activeOfThread(threadId);
    await Promise.all(active.map((v) => this.cancel(null, v.run.run_id, "interrupt").catch(() => undefined)));
  }
}
