import diff from "microdiff";
import type { EventStore, RecordedEvent } from "../eventstore/types.js";
import { WrongExpectedVersionError } from "../eventstore/types.js";
import { decidePurgeThread, threadStream } from "../domain/threads.js";
import { indexIncarnations, type Incarnation, type IncarnationIndex } from "../domain/thread-incarnations.js";
import { parseLogPoint, replayThread, type LogPoint, type ThreadAt } from "../../projections/replay.js";
import { readThreadEvents, threadContent } from "./thread-history.js";
import { resolveLarge } from "../eventstore/large-values.js";
import { DomainError, conflict, invalid, isNotFound, notFound } from "../domain/errors.js";
import type { AppContext } from "./context.js";
import type { ThreadLifecycle } from "./thread-lifecycle.js";
import { authorize, type Caller } from "./auth/caller.js";
import { filterMatches, type AuthFilters } from "../read-models/auth-filters.js";
import { currentRequestContext } from "../context/request-context.js";
import { eraseLeftoversOfPurge } from "../read-models/purge.js";
import { purgeCrons } from "./cron-purge.js";

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

/**
 * A thread id's history from the log as one caller may see it: the incarnations of the id whose own
 * metadata passes the caller's custom-auth filters (every one without filters), and their events.
 */
export interface ThreadHistoryView {
  threadId: string;
  /** The incarnations shown, oldest first. */
  incarnations: Incarnation[];
  /** Their events, in log order. */
  events: RecordedEvent[];
  /** The incarnation (its number) an event of the history belongs to. */
  numberOf: IncarnationIndex["numberOf"];
}

/**
 * The part of a thread id's history (`all`, every event of its streams in log order) that `filters`
 * let a caller see, each incarnation judged by its own metadata; `only` keeps one incarnation. A
 * purged incarnation has no metadata left: only a caller without filters sees what is left of it.
 * Pure.
 */
export function historyView(id: string, all: readonly RecordedEvent[], filters: AuthFilters | undefined, only?: number): ThreadHistoryView {
  const index = indexIncarnations(id, all);
  const incarnations = index.incarnations.filter((inc) => (only === undefined || inc.number === only) && visibleUnder(inc, filters));
  const shown = new Set(incarnations.map((inc) => inc.number));
  return { threadId: id, incarnations, events: all.filter((e) => shown.has(index.numberOf(e))), numberOf: index.numberOf };
}

/** Whether custom-auth filters let a caller see an incarnation, judged by its own metadata. */
const visibleUnder = (inc: Incarnation, filters: AuthFilters | undefined): boolean =>
  !filters || (inc.metadata !== undefined && filterMatches(inc.metadata, filters));

/** An incarnation as /replay lists it. */
function incarnationJson(inc: Incarnation) {
  return {
    incarnation: inc.number,
    position: String(inc.fromPosition),
    created_at: inc.thread && !inc.thread.purged ? inc.thread.thread.created_at : null,
    deleted: inc.thread?.deleted ?? true,
    purged: inc.purged,
  };
}

async function threadAtJson(store: EventStore, at: ThreadAt, incarnation: number | null) {
  const t = at.thread;
  return {
    incarnation,
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
    runs: at.runs.map((r) => ({
      run_id: r.run_id,
      status: r.status,
      assistant_id: r.assistant_id,
      created_at: r.created_at,
      multitask_strategy: r.multitask_strategy,
    })),
  };
}

const reaches = (e: RecordedEvent, point: LogPoint) => ("position" in point ? e.position <= point.position : e.created.getTime() <= point.time.getTime());

/**
 * The view's thread at `point`: the latest incarnation shown that was created by then, folded from
 * its own events only (never an earlier incarnation's runs or state); none before the first.
 */
async function replayAt(store: EventStore, view: ThreadHistoryView, point: LogPoint) {
  const starts = new Map(view.events.filter((e) => e.streamId === threadStream(view.threadId)).map((e) => [e.position, e]));
  let chosen: Incarnation | undefined;
  for (const inc of view.incarnations) {
    const start = starts.get(inc.fromPosition);
    if (start && reaches(start, point)) chosen = inc;
  }
  const events = chosen ? view.events.filter((e) => view.numberOf(e) === chosen.number) : [];
  return { thread_id: view.threadId, ...(await threadAtJson(store, replayThread(view.threadId, events, point), chosen?.number ?? null)) };
}

export type ReplayJson = Awaited<ReturnType<typeof replayAt>> & {
  /** The incarnations of the id the caller may see. */
  incarnations: ReturnType<typeof incarnationJson>[];
  diff?: { from: ReplayJson["at"]; changes: ReturnType<typeof diff> };
};

/**
 * The thread as it was at `at` (default: the last event shown), from its events in the log; with
 * `since`, also the changes from that point to `at` (paths into this same JSON). Without a view,
 * the whole history (an operator's: `npm run replay`).
 */
export async function replayFromLog(store: EventStore, id: string, at: LogPoint | undefined, since?: LogPoint, view?: ThreadHistoryView): Promise<ReplayJson> {
  const v = view ?? historyView(id, await threadEventsOr404(store, id), undefined);
  const now: LogPoint = at ?? { position: v.events[v.events.length - 1]?.position ?? -1n };
  const current = await replayAt(store, v, now);
  const incarnations = v.incarnations.map(incarnationJson);
  if (!since) return { ...current, incarnations };
  const before = await replayAt(store, v, since);
  const { at: fromAt, ...fromBody } = before;
  const { at: _toAt, ...toBody } = current;
  return { ...current, incarnations, diff: { from: fromAt, changes: diff(fromBody, toBody) } };
}

/**
 * `DELETE /threads/{id}?purge=true`: a logical delete first (its runs are cancelled), then the
 * crons bound to it, the content of every stream of the thread and the `Idempotency-Key` records of
 * requests on it leave the log, then ThreadPurged records who, when and (for an erasure) why.
 * 404 when the thread never existed or is purged already.
 */
export async function purgeThread(ctx: AppContext, lifecycle: ThreadLifecycle, id: string, actor: string, reason?: string): Promise<void> {
  await ctx.commands.catchUpWithStream(threadStream(id));
  const state = ctx.readModels.threads.load(id);
  const check = decidePurgeThread(state, id, actor, 0, ctx.now());
  if (!check.ok) throw new DomainError(check.kind, check.detail);
  if (!state!.deleted) {
    try {
      await lifecycle.delete(id);
    } catch (error) {
      // Deleted meanwhile by someone else: the purge goes on.
      if (!isNotFound(error) && !(error instanceof WrongExpectedVersionError)) throw error;
    }
  }
  // Its crons first, live or deleted: their payloads are the input of runs on it, and no tick starts one meanwhile.
  await purgeCrons(ctx, ctx.readModels.cronOwners.ofThread(id));
  const content = await threadContent(ctx.store, id);
  // The Idempotency-Key records of requests on it (each holds its request's fingerprint, a hash of its body), as
  // folded up to the thread's last event (caught up with above): a claim comes before the run it creates.
  const streams = [...content.streams, ...ctx.readModels.idempotencyKeys.ofThread(id)];
  const runIds = content.runIds;
  await ctx.store.purgeStreams(streams);
  const decision = decidePurgeThread(ctx.readModels.threads.load(id), id, actor, streams.length, ctx.now(), runIds, reason);
  if (!decision.ok) return; // purged concurrently
  // "any": on EventStoreDB the stream was just deleted, and a deleted stream is written again after its last revision.
  await ctx.commands.append({ stream: threadStream(id), events: decision.events, expected: "any", waitFor: "fold" });
  eraseLeftoversOfPurge(ctx.readModels);
}

/**
 * The thread's history as the caller may see it (`threads:<action>`; its custom-auth filters judged
 * on each incarnation's own metadata); `only` keeps one incarnation. 404 when the id never existed
 * or the caller may see none of its incarnations.
 */
export async function visibleHistory(ctx: AppContext, caller: Caller, threadId: string, action: "read" | "delete", only?: number): Promise<ThreadHistoryView> {
  const { filters } = await authorize(caller, "threads", action, { thread_id: threadId });
  const view = historyView(threadId, await threadEventsOr404(ctx.store, threadId), filters, only);
  if (view.incarnations.length === 0) {
    throw notFound(only === undefined ? `Thread with ID ${threadId} not found` : `Thread with ID ${threadId} has no incarnation ${only}`);
  }
  return view;
}

/**
 * `DELETE /threads/{id}?purge=true`: needs `threads:delete`; the thread may already be deleted (not
 * purged). A purge removes the content of every incarnation of the id (they share their streams), so
 * the caller must be allowed to see each one that still has content; refused (409) when one of them
 * is someone else's.
 */
export async function purgeVisibleThread(ctx: AppContext, lifecycle: ThreadLifecycle, caller: Caller, threadId: string): Promise<void> {
  const { filters } = await authorize(caller, "threads", "delete", { thread_id: threadId });
  const all = await threadEventsOr404(ctx.store, threadId);
  if (filters) {
    const withContent = indexIncarnations(threadId, all).incarnations.filter((inc) => inc.metadata !== undefined);
    const visible = withContent.filter((inc) => visibleUnder(inc, filters)).length;
    if (visible === 0) throw notFound(`Thread with ID ${threadId} not found`);
    if (visible < withContent.length)
      throw conflict(`Thread with ID ${threadId} cannot be purged: its id was also used by a thread you may not see, whose history a purge would remove`);
  }
  await purgeThread(ctx, lifecycle, threadId, currentRequestContext()?.actor ?? "anonymous");
}
