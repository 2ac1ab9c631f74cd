/**
 * The thread operations every edge calls, on behalf of a caller: each runs custom auth's
 * `threads:<action>` handler and honours its filters (a thread the caller may not see is not
 * found; searches and counts filter in SQL), then the command or query of threads.ts.
 */
import type { AppContext } from "./context.js";
import type { ThreadLifecycle } from "./thread-lifecycle.js";
import { authorize, type Caller } from "./auth/caller.js";
import { authorizeThread } from "./auth/guards.js";
import {
  countThreads,
  createThread,
  currentIncarnationStart,
  getThread,
  patchThread,
  searchThreads,
  threadStateConsistent,
  type ThreadQuery,
} from "./threads.js";
import { filterMatches } from "../read-models/auth-filters.js";
import { conflict, isNotFound } from "../domain/errors.js";
import type { Thread } from "../domain/threads.js";
import type { ThreadSortField } from "../read-models/threads.js";
import type { JsonObject, SortOrder } from "../domain/json.js";
import type { applySupersteps } from "./thread-state.js";
import { followThread, presentOf, type ThreadStreamEvent } from "./thread-stream.js";
import type { ThreadStreamMode, ThreadStreamStart } from "../domain/thread-stream.js";
import { newTimeOrderedId } from "../util/new-id.js";
import { filtersOnSealedMetadata } from "./sealed-metadata.js";

export interface ThreadCreateRequest {
  thread_id?: string;
  metadata?: JsonObject;
  if_exists?: "raise" | "do_nothing";
  expires_at?: string;
  supersteps?: Parameters<typeof applySupersteps>[2];
}

export type PruneStrategy = "delete" | "keep_latest";

export type ThreadSearchRequest = ThreadQuery & { sort_by?: ThreadSortField; sort_order?: SortOrder; limit: number; offset: number };

export class ThreadsAccess {
  constructor(
    private readonly ctx: AppContext,
    private readonly lifecycle: ThreadLifecycle,
  ) {}

  async create(caller: Caller, body: ThreadCreateRequest): Promise<Thread> {
    const { value, filters } = await authorize(caller, "threads", "create", {
      thread_id: body.thread_id,
      metadata: body.metadata ?? {},
      if_exists: body.if_exists ?? "raise",
    });
    // Someone else's thread with that id: a conflict, as for any existing thread (its content stays hidden).
    // A deleted thread's id is free again (as on the official servers): a new incarnation, the caller's.
    const existing = value.thread_id ? (await threadStateConsistent(this.ctx, value.thread_id))?.thread : undefined;
    if (existing && filters && !filterMatches(existing.metadata, filters)) throw conflict(`Thread with ID ${value.thread_id} already exists`);
    const thread = await createThread(this.ctx, {
      thread_id: value.thread_id,
      metadata: value.metadata ?? {},
      if_exists: value.if_exists ?? "raise",
      expires_at: body.expires_at,
    });
    if (body.supersteps?.length) return this.lifecycle.applySupersteps(thread.thread_id, body.supersteps);
    return thread;
  }

  async search(caller: Caller, q: ThreadSearchRequest): Promise<{ page: Thread[]; total: number }> {
    const { filters } = await authorize(caller, "threads", "search", { ...q });
    if (filtersOnSealedMetadata(this.ctx, q.metadata)) return { page: [], total: 0 };
    return searchThreads(this.ctx, q, filters);
  }

  async count(caller: Caller, q: ThreadQuery): Promise<number> {
    const { filters } = await authorize(caller, "threads", "search", { ...q });
    if (filtersOnSealedMetadata(this.ctx, q.metadata)) return 0;
    return countThreads(this.ctx, q, filters);
  }

  async get(caller: Caller, threadId: string): Promise<Thread> {
    await authorizeThread(this.ctx, caller, "read", threadId, { thread_id: threadId });
    return getThread(this.ctx, threadId);
  }

  async patch(caller: Caller, threadId: string, metadata: JsonObject | undefined, expiresAt?: string): Promise<Thread> {
    const { value } = await authorizeThread(this.ctx, caller, "update", threadId, { thread_id: threadId, metadata: metadata ?? {} });
    return patchThread(this.ctx, threadId, value.metadata ?? {}, expiresAt);
  }

  async delete(caller: Caller, threadId: string): Promise<void> {
    await authorizeThread(this.ctx, caller, "delete", threadId, { thread_id: threadId });
    await this.lifecycle.delete(threadId);
  }

  /**
   * The thread stream (`threads:read`): its events from `start` (absent: from the thread's
   * present) until the thread is deleted or `signal` aborts. Checks run before the first event.
   */
  async stream(
    caller: Caller,
    threadId: string,
    modes: readonly ThreadStreamMode[],
    start: ThreadStreamStart | undefined,
    signal: AbortSignal,
  ): Promise<AsyncIterable<ThreadStreamEvent>> {
    await authorizeThread(this.ctx, caller, "read", threadId, { thread_id: threadId });
    const id = (await getThread(this.ctx, threadId)).thread_id;
    // Only the current incarnation: a stream from the beginning, or resumed with an id an earlier
    // thread under the same id sent, starts at its creation.
    const first = await currentIncarnationStart(this.ctx, id);
    return followThread(this.ctx.store, id, start ?? (await presentOf(this.ctx, id)), modes, signal, first);
  }

  /**
   * `POST /threads/prune`: `delete` deletes the threads (as DELETE /threads/{id}, `threads:delete`);
   * `keep_latest` keeps each thread and its latest checkpoint per namespace, discarding the rest
   * of its history (`threads:update`). Threads that do not exist or that the caller may not see
   * are skipped; the count is of the threads pruned.
   */
  async prune(caller: Caller, threadIds: readonly string[], strategy: PruneStrategy): Promise<{ pruned_count: number }> {
    let pruned = 0;
    for (const threadId of new Set(threadIds)) {
      try {
        await authorizeThread(this.ctx, caller, strategy === "delete" ? "delete" : "update", threadId, { thread_id: threadId, strategy });
        await getThread(this.ctx, threadId);
      } catch (error) {
        if (isNotFound(error)) continue;
        throw error;
      }
      if (strategy === "delete") await this.lifecycle.delete(threadId);
      else await (await this.ctx.runtime()).checkpointer.discardAllButLatest(threadId, "pruned (keep_latest)");
      pruned++;
    }
    return { pruned_count: pruned };
  }

  /**
   * As the official servers: `threads:read` on the source, then `threads:create` for the copy
   * (a read-only caller gets that handler's refusal). The copy has the source's metadata as the
   * create handler leaves it (e.g. its owner stamped on).
   */
  async copy(caller: Caller, threadId: string): Promise<Thread> {
    await authorizeThread(this.ctx, caller, "read", threadId, { thread_id: threadId });
    const source = (await threadStateConsistent(this.ctx, threadId))?.thread;
    if (!source) return this.lifecycle.copy(threadId); // its own "not found" answer
    const { value } = await authorize(caller, "threads", "create", {
      thread_id: newTimeOrderedId(),
      metadata: { ...source.metadata },
      if_exists: "raise" as const,
    });
    return this.lifecycle.copy(threadId, { threadId: value.thread_id, metadata: value.metadata ?? {} });
  }
}
