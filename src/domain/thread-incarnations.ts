/**
 * Incarnations of a thread id. A deleted thread's id may be created again (as the official servers
 * allow): each ThreadCreated on `thread-{id}` starts an incarnation, a thread of its own with its
 * own metadata (its owner, what custom auth judges), checkpoints and runs, that shares only the id
 * and the streams with the ones before it. Auditors see a thread's history one incarnation at a
 * time, each judged by that incarnation's own metadata.
 *
 * Pure: folds of the events of one thread id (type, data, revision, position, attribution), no I/O.
 */
import { PURGED_EVENT_TYPE, purgedTypeOf } from "../eventstore/types.js";
import { isEvent } from "./event-of.js";
import { RUN_STREAM_PREFIX } from "./runs.js";
import { evolveThread, threadStream, type ThreadEvent, type ThreadState } from "./threads.js";
import type { JsonObject } from "./json.js";

/** What the folds read of an event of the log (a RecordedEvent has it). */
export interface IncarnationLogEvent {
  streamId: string;
  type: string;
  data: unknown;
  revision: bigint;
  position: bigint;
  metadata: Record<string, unknown>;
}

export interface Incarnation {
  /** 1 for the id's first creation, then 2, 3, ... in log order. */
  number: number;
  /** Revision in `thread-{id}` of the event that started it (its ThreadCreated, or its tombstone). */
  fromRevision: bigint;
  /** Log position of that event. */
  fromPosition: bigint;
  /** The thread as this incarnation's own events fold it; undefined while nothing but tombstones are left of it. */
  thread: ThreadState | undefined;
  /**
   * Its metadata as it last was while the thread lived (created, patched, stamped by its runs):
   * what custom-auth filters are judged on. Undefined once its content was purged (nobody may see
   * it but a caller without filters).
   */
  metadata: JsonObject | undefined;
  /** Its content left the log (`DELETE /threads/{id}?purge=true`). */
  purged: boolean;
}

// Tombstones of a purge keep the type of the event they replace (`purgedTypeOf`).

/** Whether the event starts an incarnation: a ThreadCreated, or what a purge left of one. */
export const startsIncarnation = (e: { type: string; data: unknown }): boolean => e.type === "ThreadCreated" || purgedTypeOf(e) === "ThreadCreated";

/**
 * The incarnations of a thread id after one more event of its `thread-{id}` stream (in revision
 * order): a ThreadCreated starts the next one; the other events move the latest one (a thread
 * stream only ever writes to its latest incarnation; marks that arrive late for the runs of an
 * earlier one change nothing, see evolveThread); a ThreadPurged purges all of them (a purge
 * removes every stream of the id). Earlier incarnations are shared, never changed in place.
 */
export function evolveIncarnations(state: readonly Incarnation[] | undefined, event: IncarnationLogEvent): Incarnation[] {
  const list = state ?? [];
  if (startsIncarnation(event)) {
    const purged = event.type === PURGED_EVENT_TYPE;
    const thread = purged ? undefined : evolveThread(undefined, { type: "ThreadCreated", data: event.data } as ThreadEvent, event.revision);
    return [
      ...list,
      { number: list.length + 1, fromRevision: event.revision, fromPosition: event.position, thread, metadata: thread?.thread.metadata, purged },
    ];
  }
  if (event.type === "ThreadPurged") {
    const purged = list.map((inc) => ({ ...inc, metadata: undefined, purged: true }));
    // On EventStoreDB a purged stream's events are gone: the record of the purge is all there is of them.
    const last = purged.pop() ?? {
      number: 1,
      fromRevision: event.revision,
      fromPosition: event.position,
      thread: undefined,
      metadata: undefined,
      purged: true,
    };
    return [...purged, { ...last, thread: evolveThread(last.thread, { type: "ThreadPurged", data: event.data } as ThreadEvent, event.revision) }];
  }
  const last = list[list.length - 1];
  // Tombstones carry nothing to fold; nor does an event before any creation (a log cut short).
  if (!last?.thread || event.type === PURGED_EVENT_TYPE) return list as Incarnation[];
  const thread = evolveThread(last.thread, { type: event.type, data: event.data } as ThreadEvent, event.revision);
  const metadata = thread.deleted ? last.metadata : thread.thread.metadata;
  return [...list.slice(0, -1), { ...last, thread, metadata }];
}

/** The incarnations of a thread id, folded from its `thread-{id}` events (any other event is ignored). */
export function incarnationsOf(threadId: string, events: Iterable<IncarnationLogEvent>): Incarnation[] {
  const stream = threadStream(threadId);
  let state: Incarnation[] = [];
  for (const e of events) if (e.streamId === stream) state = evolveIncarnations(state, e);
  return state;
}

/** The run an event belongs to: its own stream, its attribution, or the run its data names. */
function runOfEvent(e: IncarnationLogEvent): string | undefined {
  if (e.streamId.startsWith(RUN_STREAM_PREFIX)) return e.streamId.slice(RUN_STREAM_PREFIX.length);
  if (typeof e.metadata.correlation_id === "string") return e.metadata.correlation_id;
  const d = (e.data ?? {}) as { run_id?: unknown; run?: { run_id?: unknown } };
  if (typeof d.run_id === "string") return d.run_id;
  if (typeof d.run?.run_id === "string") return d.run.run_id;
  return undefined;
}

/** The run a RunEnqueued (or its tombstone, whose attribution names the run) enqueued. */
function enqueuedRun(e: IncarnationLogEvent): string | undefined {
  if (isEvent(e, "RunEnqueued")) return e.data.run.run_id;
  if (purgedTypeOf(e) === "RunEnqueued" && typeof e.metadata.correlation_id === "string") return e.metadata.correlation_id;
  return undefined;
}

/** A thread id's incarnations, and which one each event of its history belongs to. */
export interface IncarnationIndex {
  incarnations: Incarnation[];
  /** The incarnation (its number) an event of the thread's history belongs to; 0 when the id has none. */
  numberOf(e: IncarnationLogEvent): number;
}

/**
 * Indexes a thread's history (its thread, checkpoint and run streams, in log order): an event of a
 * run belongs to the incarnation that enqueued the run, wherever and whenever it was written (a run
 * of a deleted thread may still write after the id was created again); the thread stream's other
 * events to the incarnation their revision falls in; any other event (checkpoints written outside a
 * run) to the incarnation its log position falls in.
 */
export function indexIncarnations(threadId: string, events: readonly IncarnationLogEvent[]): IncarnationIndex {
  const stream = threadStream(threadId);
  const incarnations = incarnationsOf(threadId, events);
  const runs = new Map<string, number>();
  const byRevision = (revision: bigint) => lastWhere(incarnations, (inc) => inc.fromRevision <= revision);
  for (const e of events) {
    const run = e.streamId === stream ? enqueuedRun(e) : undefined;
    if (run !== undefined) runs.set(run, byRevision(e.revision));
  }
  return {
    incarnations,
    numberOf(e) {
      if (incarnations.length === 0) return 0;
      if (e.streamId === stream && startsIncarnation(e)) return byRevision(e.revision);
      const run = runOfEvent(e);
      const ofRun = run === undefined ? undefined : runs.get(run);
      if (ofRun !== undefined) return ofRun;
      if (e.streamId === stream) return byRevision(e.revision);
      return lastWhere(incarnations, (inc) => inc.fromPosition <= e.position);
    },
  };
}

/** The number of the last incarnation that passes (the first one when none does: events from before it belong to it). */
function lastWhere(incarnations: readonly Incarnation[], pass: (inc: Incarnation) => boolean): number {
  for (let i = incarnations.length - 1; i >= 0; i--) if (pass(incarnations[i])) return incarnations[i].number;
  return incarnations[0]?.number ?? 0;
}
