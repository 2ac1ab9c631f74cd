/**
 * `POST /internal/erase`: a user's erasure. Purges every thread the user owns, as
 * `DELETE /threads/{id}?purge=true` does (its ThreadPurged names the actor and the reason), and
 * every store item in the user's namespaces, whose streams leave the log (the encrypting store
 * destroys their data keys first).
 *
 * What belongs to a user:
 * - a thread whose `metadata.owner` is the user id (a string), live or deleted but not purged yet:
 *   the convention of LangGraph's custom-auth docs, where the `create` handler stamps the owner;
 * - a store item whose namespace's first label is the user id: the convention of LangGraph's docs
 *   for per-user memory (`[user_id, "memories"]`), which a store handler enforces by prepending
 *   the identity to every namespace;
 * - a cron whose `metadata.owner` is the user id, live or deleted (its payload is the input of its
 *   runs); a purged thread's crons go with it, whoever owns them.
 * A thread id also used by an incarnation that someone else owned is left alone (its streams hold
 * both, a purge would remove theirs too) and reported in `skipped_threads`.
 *
 * Who may erase whom: without custom auth the caller is the operator (the API key holder when
 * LANGGRAPH_API_KEY is set, anyone in a development server without it, as every route) and may
 * erase any user. With custom auth only the user themself may: the authenticated identity must be
 * the `user_id` (403 otherwise), and the `users:erase` handler (or `users`, `*:erase`, `*`) runs
 * with `{user_id, reason}`: it may refuse (false, or an HTTPException with its status); filters
 * it returns must match `{owner: user_id, user_id}`, the metadata of what is erased (403 otherwise).
 * A handler cannot let one user erase another: an operator's erasure goes through a server
 * without custom auth, or through the offline tools.
 *
 * Idempotent: what was purged no longer belongs to anyone, so a second call answers zeros.
 */
import type { AppContext } from "./context.js";
import type { ThreadLifecycle } from "./thread-lifecycle.js";
import type { StoreService } from "./store.js";
import { authorize, isRestricted, type Caller } from "./auth/caller.js";
import { AuthError } from "./auth/engine.js";
import { purgeThread, threadEventsOr404 } from "./audit.js";
import { indexIncarnations } from "../domain/thread-incarnations.js";
import { isNotFound } from "../domain/errors.js";
import { filterMatches } from "../read-models/auth-filters.js";
import { eraseLeftoversOfPurge } from "../read-models/purge.js";
import { currentRequestContext } from "../context/request-context.js";
import { purgeCrons } from "./cron-purge.js";

export interface EraseRequest {
  user_id: string;
  reason: string;
}

export interface EraseResult {
  threads: number;
  store_items: number;
  crons: number;
  /** Threads owned by the user whose id another owner's incarnation also used: not purged. */
  skipped_threads?: string[];
}

export interface EraseDeps {
  ctx: AppContext;
  lifecycle: ThreadLifecycle;
  store: StoreService;
}

/** Checks that `caller` may erase `request.user_id` (see the rule above); throws AuthError. */
export async function authorizeErase(caller: Caller, request: EraseRequest): Promise<void> {
  if (!isRestricted(caller)) return;
  const identity = caller.auth?.user.identity;
  if (identity === undefined || identity !== request.user_id) {
    throw new AuthError(403, "Only the user themself may erase their data when custom auth is configured");
  }
  // The handler sees a copy: the subject of the erasure is the request's, whatever the handler does to its value.
  const { filters } = await authorize(caller, "users", "erase", { ...request });
  if (filters && !filterMatches({ owner: request.user_id, user_id: request.user_id }, filters)) throw new AuthError(403, "Not authorized");
}

export async function eraseUser(d: EraseDeps, caller: Caller, request: EraseRequest): Promise<EraseResult> {
  await authorizeErase(caller, request);
  const actor = currentRequestContext()?.actor ?? "anonymous";
  const user = request.user_id;
  let threads = 0;
  const skipped: string[] = [];
  for (const threadId of d.ctx.readModels.threads.ownedOrDeleted(user)) {
    const owners = await ownersOf(d.ctx, threadId);
    if (!owners.has(user)) continue;
    if (owners.size > 1) {
      skipped.push(threadId);
      continue;
    }
    try {
      await purgeThread(d.ctx, d.lifecycle, threadId, actor, request.reason);
      threads++;
    } catch (error) {
      // Purged meanwhile by someone else: nothing left to erase.
      if (!isNotFound(error)) throw error;
    }
  }
  let storeItems = 0;
  for (const item of d.store.itemsUnder([user])) {
    if (await d.store.purge(item.namespace, item.key)) storeItems++;
  }
  const crons = await purgeCrons(d.ctx, d.ctx.readModels.cronOwners.ofOwner(user));
  if (storeItems > 0 || crons > 0) eraseLeftoversOfPurge(d.ctx.readModels);
  return { threads, store_items: storeItems, crons, ...(skipped.length ? { skipped_threads: skipped } : {}) };
}

/** The owners of the incarnations of the id that still have content (a purge removes them all); `undefined` for none named. */
async function ownersOf(ctx: AppContext, threadId: string): Promise<Set<unknown>> {
  const events = await threadEventsOr404(ctx.store, threadId);
  const withContent = indexIncarnations(threadId, events).incarnations.filter((inc) => inc.metadata !== undefined);
  return new Set(withContent.map((inc) => inc.metadata!.owner));
}
