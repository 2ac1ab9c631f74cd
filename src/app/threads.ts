import type { AppContext } from "./context.js";
import { catchUpWithStream, execute } from "./commands.js";
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
  type ThreadStatus,
} from "../domain/threads.js";
import type { JsonObject } from "../domain/json.js";
import type { ThreadFilter, ThreadSortField } from "../read-models/threads.js";
import type { SortOrder } from "../read-models/statements.js";
import { notFound } from "../domain/errors.js";
import { authConditions, type AuthFilters } from "../read-models/auth-filters.js";
import { newTimeOrderedId } from "../util/new-id.js";

/** Application service of threads: commands through the deciders, queries on the read model. */

/** The live thread's folded state in the local read model (undefined: unknown or deleted). */
export function threadState(ctx: AppContext, threadId: string): ThreadState | undefined {
  const s = ctx.readModels.threads.load(threadId.toLowerCase());
  return s && !s.deleted ? s : undefined;
}

/** Like threadState; a miss first catches up with the thread's own stream (another process may have written it). */
export async function threadStateConsistent(ctx: AppContext, threadId: string): Promise<ThreadState | undefined> {
  const found = threadState(ctx, threadId);
  if (found) return found;
  await catchUpWithStream(ctx, threadStream(threadId.toLowerCase()));
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
  const threadId = cmd.thread_id?.toLowerCase() ?? newTimeOrderedId();
  const now = ctx.now();
  // An id made here was never used: there is nothing to look up.
  const load = cmd.thread_id === undefined ? () => undefined : loadThread(ctx, threadId);
  const outcome = await execute(ctx, load, threadStream(threadId), (s) => decideCreateThread(s, { ...cmd, thread_id: threadId }, now));
  const [created] = outcome.decision.events;
  // The thread its ThreadCreated makes (the fold the read model applied to it) rather than a read back of the
  // row; with if_exists "do_nothing" on an existing thread, that thread.
  const thread = created ? evolveThread(undefined, created as ThreadEvent, 0n).thread : outcome.state!.thread;
  return withValues(ctx, thread);
}

export async function patchThread(ctx: AppContext, threadId: string, metadata: JsonObject, expiresAt?: string): Promise<Thread> {
  const id = threadId.toLowerCase();
  const now = ctx.now();
  const { state } = await execute(ctx, loadThread(ctx, id), threadStream(id), (s) =>
    decidePatchThread(s && !s.deleted ? s : undefined, metadata, now, expiresAt),
  );
  return withValues(ctx, state!.thread);
}

export async function deleteThread(ctx: AppContext, threadId: string): Promise<void> {
  const id = threadId.toLowerCase();
  const now = ctx.now();
  await execute(ctx, loadThread(ctx, id), threadStream(id), (s) => decideDeleteThread(s, now));
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
