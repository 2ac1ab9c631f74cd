import diff from "microdiff";
import type { EventStore, RecordedEvent } from "../eventstore/types.js";
import { PURGED_EVENT_TYPE, WrongExpectedVersionError } from "../eventstore/types.js";
import { evolveThread, decidePurgeThread, threadStream, type ThreadEvent, type ThreadState } from "../domain/threads.js";
import type { JsonObject } from "../domain/json.js";
import { parseLogPoint, replayThread, type LogPoint, type ThreadAt } from "../../projections/replay.js";
import { readThreadEvents, runIdsOf, threadContentStreams } from "./thread-history.js";
import { resolveLarge } from "./large-values.js";
import { DomainError, invalid, isNotFound, notFound } from "../domain/errors.js";
import type { AppContext } from "./context.js";
import type { ThreadLifecycle } from "./thread-lifecycle.js";
import { catchUpWithStream } from "./commands.js";

/** `at` / `diff` of /replay and of `npm run replay`; a 422 naming the parameter when malformed. */
export function logPointParam(name: string, text: string | undefined): LogPoint | undefined {
  if (text === undefined) return undefined;
  const point = parseLogPoint(text);
  if (!point) throw invalid(`${name}: expected a log position (a non-negative integer) or an ISO 8601 time, got ${JSON.stringify(text)}`);
  return point;
}

/** The thread's events from the log; 404 when it never existed. */
export async function threadEventsOr404(store: EventStore, threadId: string): Promise<RecordedEvent[]> {
  const events = await readThreadEvents(store, threadId);
  if (!events) throw notFound(`Thread with ID ${threadId} not found`);
  return events;
}

/** The thread's metadata as the log last showed it before any deletion (for the custom-auth filters). */
export function lastLiveMetadata(threadId: string, events: readonly RecordedEvent[]): JsonObject | undefined {
  let state: ThreadState | undefined;
  let live: JsonObject | undefined;
  for (const e of events) {
    if (e.streamId !== threadStream(threadId) || e.type === PURGED_EVENT_TYPE) continue;
    state = evolveThread(state, { type: e.type, data: e.data } as ThreadEvent, e.revision);
    if (state.deleted) break;
    live = state.thread.metadata;
  }
  return live;
}

async function threadAtJson(store: EventStore, threadId: string, at: ThreadAt) {
  const t = at.thread;
  return {
    at: { position: String(at.position), time: at.time },
    thread: t && {
      thread_id: t.thread.thread_id,
      status: t.deleted ? "deleted" : t.thread.status,
      deleted: t.deleted,
      purged: t.purged ?? false,
      created_at: t.thread.created_at,
      updated_at: t.thread.updated_at,
      metadata: t.thread.metadata,
      values: await resolveLarge(store, t.thread.values),
      interrupts: t.thread.interrupts,
    },
    runs: at.runs.map((r) => ({ run_id: r.run_id, status: r.status, assistant_id: r.assistant_id, created_at: r.created_at, multitask_strategy: r.multitask_strategy })),
  };
}

export type ReplayJson = Awaited<ReturnType<typeof threadAtJson>> & { thread_id: string; diff?: { from: ReplayJson["at"]; changes: ReturnType<typeof diff> } };

/**
 * The thread as it was at `at` (default: now), from its events in the log; with `since`, also the
 * changes from that point to `at` (paths into this same JSON).
 */
export async function replayFromLog(store: EventStore, threadId: string, at: LogPoint | undefined, since?: LogPoint, events?: RecordedEvent[]): Promise<ReplayJson> {
  const id = threadId.toLowerCase();
  const all = events ?? (await threadEventsOr404(store, id));
  const now: LogPoint = at ?? { position: all[all.length - 1]?.position ?? -1n };
  const current = { thread_id: id, ...(await threadAtJson(store, id, replayThread(id, all, now))) };
  if (!since) return current;
  const before = { thread_id: id, ...(await threadAtJson(store, id, replayThread(id, all, since))) };
  const { at: fromAt, ...fromBody } = before;
  const { at: _toAt, ...toBody } = current;
  return { ...current, diff: { from: fromAt, changes: diff(fromBody, toBody) } };
}

/**
 * `DELETE /threads/{id}?purge=true`: a logical delete first (its runs are cancelled), then the
 * content of every stream of the thread leaves the log, then ThreadPurged records who and when.
 * 404 when the thread never existed or is purged already.
 */
export async function purgeThread(ctx: AppContext, lifecycle: ThreadLifecycle, threadId: string, actor: string): Promise<void> {
  const id = threadId.toLowerCase();
  await catchUpWithStream(ctx, threadStream(id));
  const state = ctx.readModels.threads.load(id);
  const check = decidePurgeThread(state, id, actor, 0, ctx.now());
  if (!check.ok) throw new DomainError(check.kind, check.detail);
  if (!state!.deleted) {
    try {
      await lifecycle.delete(id);
    } catch (error) {
      // Deleted meanwhile by someone else: the purge goes on.
      if (!(isNotFound(error)) && !(error instanceof WrongExpectedVersionError)) throw error;
    }
  }
  // Read before the purge: afterwards EventStoreDB's thread stream holds no RunEnqueued any more.
  const runIds = runIdsOf(await ctx.store.readStream(threadStream(id)));
  const streams = await threadContentStreams(ctx.store, id);
  await ctx.store.purgeStreams(streams);
  const decision = decidePurgeThread(ctx.readModels.threads.load(id), id, actor, streams.length, ctx.now(), runIds);
  if (!decision.ok) return; // purged concurrently
  // "any": on EventStoreDB the stream was just deleted, and a deleted stream is written again after its last revision.
  const result = await ctx.store.append(threadStream(id), decision.events, "any");
  await ctx.readModels.store.waitFor(result.position);
}
