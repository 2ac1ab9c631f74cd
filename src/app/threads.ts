import type { AppContext } from "./context.js";
import { withValuesResolved } from "../eventstore/large-values.js";
import {
  decideCreateThread,
  decideDeleteThread,
  decidePatchThread,
  evolveThread,
  threadStream,
  type ThreadEvent,
  type Thread,
  type ThreadState,
} from "../domain/threads.js";
import type { JsonObject } from "../domain/json.js";
import type { Decision } from "../domain/decision.js";
import type { ThreadFilter, ThreadSortField } from "../read-models/threads.js";
import type { SortOrder } from "../read-models/statements.js";
import { notFound } from "../domain/errors.js";
import { authConditions, type AuthFilters } from "../read-models/auth-filters.js";
import { newTimeOrderedId } from "../util/new-id.js";
import { checkpointStream } from "../domain/checkpoint-events.js";
import { startsIncarnation } from "../domain/thread-incarnations.js";
import { PURGED_EVENT_TYPE } from "../eventstore/types.js";

/** Application service of threads: commands through the deciders, queries on the read model. */

/** The live thread's folded state in the local read model (undefined: unknown or deleted). */
export function threadState(ctx: AppContext, threadId: string): ThreadState | undefined {
  const s = ctx.readModels.threads.load(threadId);
  return s && !s.deleted ? s : undefined;
}

/** Like threadState; a miss first catches up with the thread's own stream (another process may have written it). */
export async function threadStateConsistent(ctx: AppContext, threadId: string): Promise<ThreadState | undefined> {
  const found = threadState(ctx, threadId);
  if (found) return found;
  await ctx.commands.catchUpWithStream(threadStream(threadId));
  return threadState(ctx, threadId);
}

export async function getThread(ctx: AppContext, threadId: string): Promise<Thread> {
  const s = await threadStateConsistent(ctx, threadId);
  if (!s) throw notFound(`Thread with ID ${threadId} not found`);
  return withValues(ctx, s.thread);
}

/** The thread with its values resolved when they were too large for one event (see large-values.ts). */
async function withValues(ctx: AppContext, thread: Thread): Promise<Thread> {
  return withValuesResolved(ctx.store, thread);
}

const loadThread = (ctx: AppContext, id: string) => () => ctx.readModels.threads.load(id);

export async function createThread(
  ctx: AppContext,
  cmd: { thread_id?: string; metadata: JsonObject; if_exists: "raise" | "do_nothing"; copied_from?: string; values?: JsonObject | null; expires_at?: string },
): Promise<Thread> {
  const threadId = cmd.thread_id ?? newTimeOrderedId();
  const now = ctx.now();
  // An id made here was never used: there is nothing to look up.
  const load = cmd.thread_id === undefined ? () => undefined : loadThread(ctx, threadId);
  const before = load();
  // A deleted thread's id created again starts a new incarnation of it (see domain/thread-incarnations.ts).
  if (before?.deleted) await clearLeftoverCheckpoints(ctx, threadId);
  const outcome = await ctx.commands.decide({
    stream: threadStream(threadId),
    load,
    loaded: { state: before },
    decide: (s) => decideCreateThread(s, { ...cmd, thread_id: threadId }, now),
  });
  const [created] = outcome.decision.events;
  // The thread its ThreadCreated makes (the fold the read model applied to it) rather than a read back of the
  // row; with if_exists "do_nothing" on an existing thread, that thread.
  const thread = created ? evolveThread(undefined, created as ThreadEvent, 0n).thread : outcome.state!.thread;
  return withValues(ctx, thread);
}

/**
 * Before a deleted thread's id is created again: its checkpoints must not become the new thread's.
 * A deletion ends with CheckpointsDeleted, which the new thread's checkpoints start after; when
 * something came after it (a run of the deleted thread still writing, or a deletion cut short
 * before it was written), the checkpoints are deleted again. Written before the new ThreadCreated,
 * so it belongs to the deleted thread's history.
 */
async function clearLeftoverCheckpoints(ctx: AppContext, threadId: string): Promise<void> {
  const [last] = await ctx.store.readStream(checkpointStream(threadId), { direction: "backwards", fromRevision: "end", maxCount: 1 });
  if (!last || last.type === "CheckpointsDeleted" || last.type === PURGED_EVENT_TYPE) return;
  await (await ctx.runtime()).checkpointer.deleteThread(threadId);
}

/** Thread events a page of the backward search for the current incarnation's start reads. */
const PAGE = 100;

/**
 * Revision of the ThreadCreated that began the thread's current incarnation (0 unless its id was
 * used before): what came before it belongs to a deleted thread. Searched from the end of the
 * thread's stream, which holds only its own events (no checkpoints, no outputs).
 */
export async function currentIncarnationStart(ctx: AppContext, threadId: string): Promise<bigint> {
  let from: bigint | "end" = "end";
  for (;;) {
    const page = await ctx.store.readStream(threadStream(threadId), { direction: "backwards", fromRevision: from, maxCount: PAGE });
    const created = page.find((e) => startsIncarnation(e));
    if (created) return created.revision;
    const last = page[page.length - 1];
    if (page.length < PAGE || !last || last.revision === 0n) return 0n;
    from = last.revision - 1n;
  }
}

export async function patchThread(ctx: AppContext, id: string, metadata: JsonObject, expiresAt?: string): Promise<Thread> {
  const now = ctx.now();
  const { state } = await ctx.commands.decide({
    stream: threadStream(id),
    load: loadThread(ctx, id),
    decide: (s) => decidePatchThread(s && !s.deleted ? s : undefined, metadata, now, expiresAt),
  });
  return withValues(ctx, state!.thread);
}

/** Appends the thread's deletion; `only`: unless the thread (as the log now has it) fails this test. Says whether it deleted. */
export async function deleteThread(ctx: AppContext, id: string, only?: (s: ThreadState | undefined) => boolean): Promise<boolean> {
  const now = ctx.now();
  const { decision } = await ctx.commands.decide({
    stream: threadStream(id),
    load: loadThread(ctx, id),
    decide: (s): Decision => (only && !only(s) ? { ok: true, events: [] } : decideDeleteThread(s, now)),
  });
  return decision.events.length > 0;
}

export type ThreadQuery = ThreadFilter;

/** Threads matching `q` that the custom-auth `filters` let the user see (applied in the SQL query). */
export function countThreads(ctx: AppContext, q: ThreadQuery, filters?: AuthFilters): number {
  return ctx.readModels.threads.count({ ...q, extra: authConditions(filters, "threads.metadata") });
}

export async function searchThreads(
  ctx: AppContext,
  q: ThreadQuery & { sort_by?: ThreadSortField; sort_order?: SortOrder; limit: number; offset: number },
  filters?: AuthFilters,
): Promise<{ page: Thread[]; total: number }> {
  const { page, total } = ctx.readModels.threads.search({ ...q, extra: authConditions(filters, "threads.metadata") });
  return { page: await Promise.all(page.map((t) => withValues(ctx, t))), total };
}
