import type { AppContext } from "./context.js";
import { createThread, deleteThread, threadStateConsistent } from "./threads.js";
import { applySupersteps } from "./thread-state.js";
import { conflict } from "../domain/errors.js";
import type { Thread } from "../domain/threads.js";
import type { JsonObject } from "../domain/json.js";
import { externalizeIfLarge, isLargeValueMarker, resolveLarge } from "../eventstore/large-values.js";
import { newTimeOrderedId } from "../util/new-id.js";

/** What happens to a thread's checkpoints (and other streams) when the thread is copied or deleted. */
export interface ThreadLifecycle {
  /** Copies the thread with its checkpoints; `as` names the copy and its metadata (default: a new id, the source's metadata). */
  copy(threadId: string, as?: { threadId?: string; metadata?: JsonObject }): Promise<Thread>;
  delete(threadId: string): Promise<void>;
  applySupersteps(threadId: string, supersteps: Parameters<typeof applySupersteps>[2]): Promise<Thread>;
  /** Hooks other features register, run before the deletion (e.g. runs cancel the thread's active runs). */
  onDelete(hook: (threadId: string) => Promise<void>): void;
}

export function threadLifecycle(ctx: AppContext): ThreadLifecycle {
  const deleteHooks: ((threadId: string) => Promise<void>)[] = [];
  return {
    async copy(threadId, as = {}) {
      const source = (await threadStateConsistent(ctx, threadId))?.thread;
      if (!source) throw conflict(`Thread ${threadId} not found`);
      const copyId = as.threadId?.toLowerCase() ?? newTimeOrderedId();
      // Values written beside the source (its runs' or its own) are written again beside the copy: a purge
      // of the source removes those streams, and the copy must keep its values.
      const values = isLargeValueMarker(source.values)
        ? await externalizeIfLarge(ctx.store, "thread-values-", copyId, await resolveLarge(ctx.store, source.values))
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
      // Hooks first: the thread's runs leave the read models with the thread.
      for (const hook of deleteHooks) await hook(threadId.toLowerCase());
      await deleteThread(ctx, threadId);
      await (await ctx.runtime()).checkpointer.deleteThread(threadId.toLowerCase());
    },
    applySupersteps: (threadId, supersteps) => applySupersteps(ctx, threadId, supersteps),
    onDelete(hook) {
      deleteHooks.push(hook);
    },
  };
}
