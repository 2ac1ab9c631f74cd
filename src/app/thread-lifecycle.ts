import type { AppContext } from "./context.js";
import { createThread, deleteThread, threadStateConsistent } from "./threads.js";
import { applySupersteps } from "./thread-state.js";
import { conflict } from "../domain/errors.js";
import { THREAD_VALUES_STREAM_PREFIX, type Thread, type ThreadState } from "../domain/threads.js";
import type { JsonObject } from "../domain/json.js";
import { externalizeIfLarge, isLargeValueMarker, resolveLarge } from "../eventstore/large-values.js";
import { newTimeOrderedId } from "../util/new-id.js";

/** What happens to a thread's checkpoints (and other streams) when the thread is copied or deleted. */
export interface ThreadLifecycle {
  /** Copies the thread with its checkpoints; `as` names the copy and its metadata (default: a new id, the source's metadata). */
  copy(threadId: string, as?: { threadId?: string; metadata?: JsonObject }): Promise<Thread>;
  delete(threadId: string): Promise<void>;
  /**
   * Deletes a stateless run's temporary thread once the run is over, unless the thread is no longer
   * that run's: another run is active on it, or it is a newer incarnation of the id (created after the run).
   */
  deleteTemporary(threadId: string, runCreatedAt: string): Promise<void>;
  applySupersteps(threadId: string, supersteps: Parameters<typeof applySupersteps>[2]): Promise<Thread>;
  /** Hooks other features register, run before the deletion (e.g. runs cancel the thread's active runs). */
  onDelete(hook: (threadId: string) => Promise<void>): void;
}

export function threadLifecycle(ctx: AppContext): ThreadLifecycle {
  const deleteHooks: ((threadId: string) => Promise<void>)[] = [];
  /**
   * The one way a thread is deleted: hooks first (the thread's runs leave the read models with it), the
   * decider, the checkpoints. A deletion `only` of a thread without active runs runs no hooks: they are
   * there to end active runs, and one started meanwhile is a reason to keep the thread, not to cancel it.
   */
  async function remove(id: string, only?: (s: ThreadState | undefined) => boolean): Promise<void> {
    if (!only) for (const hook of deleteHooks) await hook(id);
    if (!(await deleteThread(ctx, id, only))) return;
    await (await ctx.runtime()).checkpointer.deleteThread(id);
  }
  return {
    async copy(threadId, as = {}) {
      const source = (await threadStateConsistent(ctx, threadId))?.thread;
      if (!source) throw conflict(`Thread ${threadId} not found`);
      const copyId = as.threadId ?? newTimeOrderedId();
      // Values written beside the source (its runs' or its own) are written again beside the copy: a purge
      // of the source removes those streams, and the copy must keep its values.
      const values = isLargeValueMarker(source.values)
        ? await externalizeIfLarge(ctx.store, THREAD_VALUES_STREAM_PREFIX, copyId, await resolveLarge(ctx.store, source.values))
        : source.values;
      const copy = await createThread(ctx, {
        thread_id: copyId,
        metadata: as.metadata ?? { ...source.metadata },
        if_exists: "raise",
        copied_from: source.thread_id,
        values: (values as Record<string, unknown> | null) ?? null,
      });
      await (await ctx.runtime()).checkpointer.copyThread(source.thread_id, copy.thread_id);
      return copy;
    },
    async delete(threadId) {
      await remove(threadId);
    },
    async deleteTemporary(id, runCreatedAt) {
      const stillTheRuns = (s: ThreadState | undefined) => !!s && !s.deleted && s.activeRuns.length === 0 && s.thread.created_at <= runCreatedAt;
      if (stillTheRuns(ctx.readModels.threads.load(id))) await remove(id, stillTheRuns);
    },
    applySupersteps: (threadId, supersteps) => applySupersteps(ctx, threadId, supersteps),
    onDelete(hook) {
      deleteHooks.push(hook);
    },
  };
}
