/**
 * `POST /internal/truncate` (development mode only): empties the chosen resources by appending
 * the same deletion events the API appends (ThreadDeleted, RunDeleted, AssistantDeleted,
 * CheckpointsDeleted, StoreItemDeleted), so the log stays the truth and a rebuild agrees.
 * System assistants stay, as in the official JS server.
 *
 * Refused (403) when custom auth is configured: it empties every resource of every user, and the
 * Auth handlers have no resource or action for that. Running it through them would mean inventing
 * one here and applying its filters to every resource kind; a handler that allowed it without a
 * filter (a `*` handler returning nothing) would then wipe every tenant. With custom auth even a
 * development server holds several users' data; without it every caller sees everything anyway,
 * and in API-key mode the key is needed, as for any route.
 */
import type { AppContext } from "./context.js";
import type { ThreadLifecycle } from "./thread-lifecycle.js";
import type { RunsService } from "./runs.js";
import type { StoreService } from "./store.js";
import { deleteAssistant } from "./assistants.js";
import { isRestricted, type Caller } from "./auth/caller.js";
import { AuthError } from "./auth/engine.js";

export interface TruncateRequest {
  runs?: boolean;
  threads?: boolean;
  assistants?: boolean;
  checkpointer?: boolean;
  store?: boolean;
}

export interface TruncateDeps {
  ctx: AppContext;
  lifecycle: ThreadLifecycle;
  runs: RunsService;
  store: StoreService;
}

const PAGE = 500;

export async function truncate(d: TruncateDeps, what: TruncateRequest, caller: Caller): Promise<Record<string, number>> {
  if (isRestricted(caller)) {
    throw new AuthError(
      403,
      "POST /internal/truncate is refused when custom auth is configured (auth.path): it would delete every user's threads, runs, assistants and store items",
    );
  }
  const { ctx } = d;
  const counts: Record<string, number> = {};
  if (what.runs) {
    // Active runs are cancelled first; every run then leaves with a RunDeleted on its thread.
    const ids = ctx.readModels.runner.db.prepare("SELECT thread_id, run_id FROM runs ORDER BY run_id").all() as { thread_id: string; run_id: string }[];
    const threads = new Set(ids.map((r) => r.thread_id));
    for (const threadId of threads) await d.runs.cancelThreadRuns(threadId);
    let n = 0;
    for (const r of ids) {
      await d.runs.lifecycle.waitDone(r.run_id).catch(() => undefined);
      await d.runs.delete(r.thread_id, r.run_id).then(
        () => n++,
        () => undefined,
      );
    }
    counts.runs = n;
  }
  if (what.checkpointer) {
    let n = 0;
    const { checkpointer } = await ctx.runtime();
    for (const threadId of allThreadIds(ctx)) {
      if ((await checkpointer.latestCheckpointId(threadId)) === null) continue;
      await checkpointer.deleteThread(threadId);
      n++;
    }
    counts.checkpointer = n;
  }
  if (what.threads) {
    let n = 0;
    for (const threadId of allThreadIds(ctx)) {
      await d.lifecycle.delete(threadId);
      n++;
    }
    counts.threads = n;
  }
  if (what.assistants) {
    let n = 0;
    for (let offset = 0; ;) {
      const { page } = ctx.readModels.assistants.search({ limit: PAGE, offset, sort_by: "assistant_id", sort_order: "asc" });
      if (page.length === 0) break;
      for (const a of page) {
        if (a.metadata?.created_by === "system") offset++;
        else {
          await deleteAssistant(ctx, a.assistant_id);
          n++;
        }
      }
    }
    counts.assistants = n;
  }
  if (what.store) counts.store = await d.store.truncate();
  return counts;
}

/** Ids of the live threads, read before any is deleted. */
function allThreadIds(ctx: AppContext): string[] {
  return ctx.readModels.runner.db.prepare("SELECT thread_id FROM threads WHERE deleted = 0 ORDER BY thread_id").pluck().all() as string[];
}
