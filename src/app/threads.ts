import { randomUUID } from "node:crypto";
import type { AppContext } from "./context.js";
import { execute } from "./commands.js";
import { threadsProjection } from "../../projections/threads.js";
import {
  decideCreateThread,
  decideDeleteThread,
  decidePatchThread,
  threadStream,
  type Thread,
  type ThreadState,
  type ThreadStatus,
} from "../domain/threads.js";
import { jsonContains, sortBy, type JsonObject, type SortOrder } from "../domain/json.js";
import { HttpError } from "../http/errors.js";

/** Application service of threads: commands through the deciders, queries on the read model. */

export function threadState(ctx: AppContext, threadId: string): ThreadState | undefined {
  const s = ctx.runner.get(threadsProjection, threadId.toLowerCase());
  return s && !s.deleted ? s : undefined;
}

export function getThread(ctx: AppContext, threadId: string): Thread {
  const s = threadState(ctx, threadId);
  if (!s) throw new HttpError(404, `Thread with ID ${threadId} not found`);
  return s.thread;
}

export async function createThread(
  ctx: AppContext,
  cmd: { thread_id?: string; metadata: JsonObject; if_exists: "raise" | "do_nothing"; copied_from?: string; values?: JsonObject | null },
): Promise<Thread> {
  const threadId = cmd.thread_id?.toLowerCase() ?? randomUUID();
  const now = ctx.now();
  const { state } = await execute(ctx, threadsProjection, threadId, threadStream(threadId), (s) =>
    decideCreateThread(s, { ...cmd, thread_id: threadId }, now),
  );
  return state!.thread;
}

export async function patchThread(ctx: AppContext, threadId: string, metadata: JsonObject): Promise<Thread> {
  const id = threadId.toLowerCase();
  const now = ctx.now();
  const { state } = await execute(ctx, threadsProjection, id, threadStream(id), (s) =>
    decidePatchThread(s && !s.deleted ? s : undefined, metadata, now),
  );
  return state!.thread;
}

export async function deleteThread(ctx: AppContext, threadId: string): Promise<void> {
  const id = threadId.toLowerCase();
  const now = ctx.now();
  await execute(ctx, threadsProjection, id, threadStream(id), (s) => decideDeleteThread(s, now));
}

export interface ThreadQuery {
  metadata?: JsonObject;
  values?: JsonObject;
  status?: ThreadStatus;
  ids?: string[];
}

export function matchingThreads(ctx: AppContext, q: ThreadQuery): Thread[] {
  const ids = q.ids ? new Set(q.ids.map((i) => i.toLowerCase())) : undefined;
  return ctx.runner
    .values(threadsProjection)
    .filter((s) => !s.deleted)
    .map((s) => s.thread)
    .filter((t) => (ids === undefined || ids.has(t.thread_id))
      && (q.status === undefined || t.status === q.status)
      && (q.metadata === undefined || jsonContains(t.metadata, q.metadata))
      && (q.values === undefined || jsonContains(t.values, q.values)));
}

export function searchThreads(
  ctx: AppContext,
  q: ThreadQuery & { sort_by?: keyof Thread; sort_order?: SortOrder; limit: number; offset: number },
): { page: Thread[]; total: number } {
  const all = sortBy(matchingThreads(ctx, q), q.sort_by ?? "created_at", q.sort_order ?? "desc");
  return { page: all.slice(q.offset, q.offset + q.limit), total: all.length };
}
