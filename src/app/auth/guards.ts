/**
 * Per-resource authorization for the application services: runs the auth handler, then hides a single
 * resource whose metadata does not pass the returned filters behind the same 404 a missing one
 * gets (never 403: existence is not revealed). Without filters the routes' own lookups answer
 * as before. Searches and counts get the filters to apply in their queries.
 */
import type { AppContext } from "../context.js";
import { threadStateConsistent } from "../threads.js";
import { findAssistantConsistent, resolveAssistantId } from "../assistants.js";
import { filterMatches, type AuthFilters } from "../../read-models/auth-filters.js";
import type { AuthAction } from "./engine.js";
import { authorize, type Caller } from "./caller.js";
import { notFound } from "../../domain/errors.js";
import type { RunRecord } from "../../domain/run-record.js";
import type { RunRequest } from "../../domain/run-request.js";
import type { JsonObject } from "../../domain/json.js";

export interface Authorized<V> {
  value: V;
  filters: AuthFilters | undefined;
}

/** Authorizes `threads:<action>` on one thread; 404 when the thread exists but is not visible. */
export async function authorizeThread<V>(ctx: AppContext, caller: Caller, action: AuthAction<"threads">, threadId: string, value: V): Promise<Authorized<V>> {
  const result = await authorize(caller, "threads", action, value);
  if (result.filters) {
    // The consistent lookup: a thread another process just created must not slip past the check.
    const thread = (await threadStateConsistent(ctx, threadId))?.thread;
    if (thread && !filterMatches(thread.metadata, result.filters)) throw notFound(`Thread with ID ${threadId} not found`);
  }
  return result;
}

/** Authorizes `assistants:<action>` on one assistant (id or graph id); 404 when not visible. */
export async function authorizeAssistant<V>(
  ctx: AppContext,
  caller: Caller,
  action: AuthAction<"assistants">,
  idOrGraph: string,
  value: V,
): Promise<Authorized<V>> {
  const result = await authorize(caller, "assistants", action, value);
  if (result.filters) {
    let assistant;
    try {
      assistant = await findAssistantConsistent(ctx, resolveAssistantId(ctx, idOrGraph));
    } catch {
      assistant = undefined; // not an id: the route's own lookup answers
    }
    if (assistant && !filterMatches(assistant.metadata, result.filters)) throw notFound("Assistant not found");
  }
  return result;
}

/** Whether a thread (by id) is visible under the filters; a missing thread counts as visible. */
export async function threadVisible(ctx: AppContext, threadId: string, filters: AuthFilters | undefined): Promise<boolean> {
  if (!filters) return true;
  const thread = (await threadStateConsistent(ctx, threadId))?.thread;
  return !thread || filterMatches(thread.metadata, filters);
}

/** Whether a run is visible under the filters: its metadata (its thread's at creation) and its thread pass. */
export async function runVisible(ctx: AppContext, run: RunRecord, filters: AuthFilters | undefined): Promise<boolean> {
  return !filters || (filterMatches(run.metadata, filters) && (await threadVisible(ctx, run.thread_id, filters)));
}

/**
 * `threads:create_run` (for stateless runs too, as the official server): the handler may add
 * metadata (returned: the run's, and a thread made for it) or hide the thread (404).
 */
export async function authorizeCreateRun(ctx: AppContext, caller: Caller, threadId: string | null, body: RunRequest, runId: string): Promise<JsonObject> {
  const { value, filters } = await authorize(caller, "threads", "create_run", {
    thread_id: threadId ?? undefined,
    assistant_id: body.assistant_id,
    run_id: runId,
    status: "pending" as const,
    metadata: body.metadata ?? {},
    multitask_strategy: body.multitask_strategy ?? "enqueue",
    if_not_exists: body.if_not_exists ?? "reject",
    after_seconds: body.after_seconds ?? 0,
    kwargs: { ...body },
  });
  if (threadId !== null && !(await threadVisible(ctx, threadId, filters))) throw notFound(`Thread with ID ${threadId} not found`);
  return value.metadata ?? {};
}
