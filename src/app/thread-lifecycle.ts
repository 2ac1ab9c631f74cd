import type { AppContext } from "./context.js";
import { createThread, deleteThread, threadStateConsistent } from "./threads.js";
import { applySupersteps } from "./thread-state.js";
import { conflict } from "../domain/errors.js";
import type { Thread } from "../domain/threads.js";
import type { JsonObject } from "../domain/json.js";

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
      // The folded state as stored: values written beside the thread stay a reference in the copy too.
      const source = (await threadStateConsistent(ctx, threadId))?.thread;
      if (!source) throw conflict(`Thread ${threadId} not found`);
      const copy = await createThread(ctx, {
        thread_id: as.threadId,
        metadata: as.metadata ?? { ...source.metadata },
        if_exists: "raise",
        copied_from: source.thread_id,
        values: (source.values as Record<string, unknown> | null) ?? null,
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
