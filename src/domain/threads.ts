import * as z from "zod";
import type { EventsOf } from "./event-types.js";
import type { EventData } from "../eventstore/types.js";
import type { JsonObject } from "./json.js";
import { RunRecordSchema, type RunRecord, type MultitaskStrategy } from "./run-record.js";
import type { Decision } from "./decision.js";
import { JsonObjectSchema } from "../util/json.js";

/** Thread streams: `thread-{thread_id}`. They also carry the run lifecycle marks that keep double-texting rules. */
export const THREAD_STREAM_PREFIX = "thread-";
export const threadStream = (threadId: string) => `${THREAD_STREAM_PREFIX}${threadId}`;
/** `thread-values-{thread_id}`: a state update's values too large for one event, in chunks. A purge of the thread removes it. */
export const THREAD_VALUES_STREAM_PREFIX = "thread-values-";

const Obj = JsonObjectSchema;
export const ThreadStatusSchema = z.enum(["idle", "busy", "interrupted", "error"]);
export type ThreadStatus = z.infer<typeof ThreadStatusSchema>;
export const FinalRunStatusSchema = z.enum(["success", "error", "interrupted", "timeout", "rollback"]);
export type FinalRunStatus = z.infer<typeof FinalRunStatusSchema>;

export const threadEventSchemas = {
  ThreadCreated: z.object({
    thread_id: z.uuid(),
    metadata: Obj,
    created_at: z.string(),
    copied_from: z.uuid().optional(),
    /** State carried over on copy. */
    values: Obj.nullable().optional(),
    /** `ttl` (strategy delete): when the TTL sweeper deletes the thread. */
    expires_at: z.string().optional(),
  }),
  /** `expires_at` present: a new TTL from now (null: none any more). */
  ThreadUpdated: z.object({ metadata: Obj, updated_at: z.string(), expires_at: z.string().nullable().optional() }),
  /** The checkpointed state changed outside a run (POST /state, supersteps). */
  ThreadStateUpdated: z.object({
    values: z.unknown(),
    interrupts: Obj,
    /** Nodes still to run after the update (absent in events written before it was recorded). */
    next: z.array(z.string()).optional(),
    updated_at: z.string(),
  }),
  ThreadDeleted: z.object({ deleted_at: z.string() }),
  /**
   * The thread's content was removed from the log (`DELETE /threads/{id}?purge=true`): who and
   * when, how many streams and the ids of the runs they belonged to, never what they held. Appended
   * after the purge. `run_ids` lets read models drop what they hold of those runs, and on EventStoreDB
   * (where a deleted stream's events stay in `$all` until a scavenge) lets a rebuild skip them.
   */
  ThreadPurged: z.object({
    thread_id: z.uuid(),
    purged_at: z.string(),
    purged_by: z.string(),
    streams: z.number().int().nonnegative(),
    run_ids: z.array(z.string()).optional(),
    /** Why, when the purge was part of a larger request (a user's erasure: POST /internal/erase). */
    reason: z.string().optional(),
  }),
  /** A run was accepted on this thread (pending). Appended with the thread's expected revision. */
  RunEnqueued: z.object({ run: RunRecordSchema, thread_metadata: Obj }),
  /** A run on this thread ended (or was removed); the thread's status, values and interrupts follow it. */
  RunFinished: z.object({
    run_id: z.string(),
    status: FinalRunStatusSchema,
    values: z.unknown().optional(),
    interrupts: Obj.optional(),
    error: z.object({ error: z.string(), message: z.string() }).optional(),
    finished_at: z.string(),
  }),
  RunDeleted: z.object({ run_id: z.string(), deleted_at: z.string() }),
} satisfies Record<string, z.ZodType>;

export type ThreadEvent = EventsOf<typeof threadEventSchemas>;
export type ThreadPurged = z.infer<typeof threadEventSchemas.ThreadPurged>;

export interface Thread {
  thread_id: string;
  created_at: string;
  updated_at: string;
  state_updated_at: string;
  metadata: JsonObject;
  status: ThreadStatus;
  config: JsonObject;
  values: unknown;
  interrupts: JsonObject;
  error?: unknown;
}

export interface ThreadState {
  revision: bigint;
  deleted: boolean;
  thread: Thread;
  /** Pending and running runs, oldest first. */
  activeRuns: string[];
  /** Status the thread falls back to when no run is active. */
  restingStatus: Exclude<ThreadStatus, "busy">;
  /** When the TTL sweeper purges it (ISO 8601), if it has a TTL: live or deleted, until it is purged. */
  expiresAt?: string;
  /** Its content was purged from the log (a tombstone that stays one). */
  purged?: boolean;
}

const statusOf = (active: string[], resting: ThreadState["restingStatus"]): ThreadStatus => (active.length ? "busy" : resting);

/** Pure fold of one thread stream. */
export function evolveThread(state: ThreadState | undefined, event: ThreadEvent, revision: bigint): ThreadState {
  if (event.type === "ThreadCreated") {
    const d = event.data;
    const values = d.values ?? null;
    return {
      revision,
      deleted: false,
      activeRuns: [],
      restingStatus: "idle",
      ...(d.expires_at ? { expiresAt: d.expires_at } : {}),
      thread: {
        thread_id: d.thread_id,
        created_at: d.created_at,
        updated_at: d.created_at,
        state_updated_at: d.created_at,
        metadata: d.metadata,
        status: "idle",
        config: {},
        values,
        interrupts: {},
      },
    };
  }
  if (event.type === "ThreadPurged") {
    // After a purge the events before it are tombstones (skipped): there may be no state at all.
    const d = event.data;
    const at = d.purged_at;
    const base = state?.thread ?? {
      thread_id: d.thread_id,
      created_at: at,
      updated_at: at,
      state_updated_at: at,
      metadata: {},
      status: "idle" as const,
      config: {},
      values: null,
      interrupts: {},
    };
    const { error: _error, ...kept } = base; // what the thread held goes: its error and config too
    return {
      revision,
      deleted: true,
      purged: true,
      activeRuns: [],
      restingStatus: "idle",
      thread: { ...kept, config: {}, values: null, interrupts: {}, metadata: {}, updated_at: at },
    };
  }
  if (!state) throw new Error(`thread event ${event.type} before ThreadCreated`);
  // A deleted thread is a tombstone: later marks (its cancelled runs finishing) only move its revision.
  if (state.deleted) return { ...state, revision };
  const t = state.thread;
  switch (event.type) {
    case "ThreadUpdated": {
      const d = event.data;
      const expiry = d.expires_at === undefined ? state.expiresAt : (d.expires_at ?? undefined);
      const { expiresAt: _old, ...rest } = state;
      return { ...rest, ...(expiry ? { expiresAt: expiry } : {}), revision, thread: { ...t, metadata: d.metadata, updated_at: d.updated_at } };
    }
    case "ThreadStateUpdated": {
      const d = event.data;
      // An interrupted thread whose next tasks remain after the update stays interrupted (as the
      // official servers): resuming it continues them.
      const stillWaiting = state.restingStatus === "interrupted" && (d.next?.length ?? 0) > 0;
      const resting = Object.keys(d.interrupts).length || stillWaiting ? "interrupted" : "idle";
      return {
        ...state,
        revision,
        restingStatus: resting,
        thread: {
          ...t,
          values: d.values,
          interrupts: d.interrupts,
          updated_at: d.updated_at,
          state_updated_at: d.updated_at,
          status: statusOf(state.activeRuns, resting),
        },
      };
    }
    case "ThreadDeleted":
      // Its values leave the read model (the log keeps them); the revision stays for the next command. Its TTL stays:
      // the log keeps a deleted thread's content, which the sweeper purges when the TTL runs out, as it would have.
      return { ...state, revision, deleted: true, activeRuns: [], thread: { ...t, values: null, interrupts: {}, metadata: {} } };
    case "RunEnqueued": {
      const active = [...state.activeRuns, event.data.run.run_id];
      return {
        ...state,
        revision,
        activeRuns: active,
        thread: { ...t, metadata: { ...t.metadata, ...event.data.thread_metadata }, status: "busy", updated_at: event.data.run.created_at },
      };
    }
    case "RunFinished": {
      const d = event.data;
      // Only a run this thread is waiting for moves it: the mark of a run of an earlier thread under
      // the same id (deleted while the run went on, then created again) never brings that run's
      // values into the new one, nor does a mark repeated after the run's first.
      if (!state.activeRuns.includes(d.run_id)) return { ...state, revision };
      const active = state.activeRuns.filter((id) => id !== d.run_id);
      const resting: ThreadState["restingStatus"] =
        d.status === "error"
          ? "error"
          : d.interrupts && Object.keys(d.interrupts).length
            ? "interrupted"
            : d.status === "rollback"
              ? state.restingStatus
              : "idle";
      const changedValues = d.values !== undefined;
      return {
        ...state,
        revision,
        activeRuns: active,
        restingStatus: resting,
        thread: {
          ...t,
          status: statusOf(active, resting),
          updated_at: d.finished_at,
          values: changedValues ? d.values : t.values,
          interrupts: d.interrupts ?? (d.status === "rollback" ? t.interrupts : {}),
          state_updated_at: changedValues ? d.finished_at : t.state_updated_at,
          ...(d.error ? { error: d.error } : {}),
        },
      };
    }
    case "RunDeleted":
      return { ...state, revision };
  }
}

// ---- commands ----

const live = (s: ThreadState | undefined) => (s && !s.deleted ? s : undefined);

export function decideCreateThread(
  state: ThreadState | undefined,
  cmd: { thread_id: string; metadata: JsonObject; if_exists: "raise" | "do_nothing"; copied_from?: string; values?: JsonObject | null; expires_at?: string },
  now: string,
): Decision {
  if (live(state)) return cmd.if_exists === "do_nothing" ? { ok: true, events: [] } : { ok: false, kind: "conflict", detail: "Thread already exists" };
  const data: z.infer<typeof threadEventSchemas.ThreadCreated> = { thread_id: cmd.thread_id, metadata: cmd.metadata, created_at: now };
  if (cmd.copied_from) data.copied_from = cmd.copied_from;
  if (cmd.values !== undefined) data.values = cmd.values;
  if (cmd.expires_at !== undefined) data.expires_at = cmd.expires_at;
  return { ok: true, events: [{ type: "ThreadCreated", data }] };
}

export function decidePatchThread(state: ThreadState | undefined, metadata: JsonObject, now: string, expiresAt?: string): Decision {
  const s = live(state);
  if (!s) return { ok: false, kind: "not_found", detail: "Thread not found" };
  const data: z.infer<typeof threadEventSchemas.ThreadUpdated> = { metadata: { ...s.thread.metadata, ...metadata }, updated_at: now };
  if (expiresAt !== undefined) data.expires_at = expiresAt;
  return { ok: true, events: [{ type: "ThreadUpdated", data }] };
}

/**
 * Purging: a thread that exists in the log (live or deleted) and is not purged yet. The caller
 * purges its streams, then appends this decision's ThreadPurged.
 */
export function decidePurgeThread(
  state: ThreadState | undefined,
  threadId: string,
  actor: string,
  streams: number,
  now: string,
  runIds: readonly string[] = [],
  reason?: string,
): Decision {
  if (!state || state.purged) return { ok: false, kind: "not_found", detail: `Thread with ID ${threadId} not found` };
  const data = { thread_id: threadId, purged_at: now, purged_by: actor, streams, run_ids: [...runIds], ...(reason === undefined ? {} : { reason }) };
  return { ok: true, events: [{ type: "ThreadPurged", data }] };
}

export function decideDeleteThread(state: ThreadState | undefined, now: string): Decision {
  if (!live(state)) return { ok: false, kind: "not_found", detail: "Thread not found" };
  return { ok: true, events: [{ type: "ThreadDeleted", data: { deleted_at: now } }] };
}

export function decideUpdateThreadState(
  state: ThreadState | undefined,
  update: { values: unknown; interrupts: JsonObject; next?: string[] },
  now: string,
): Decision {
  const s = live(state);
  if (!s) return { ok: false, kind: "not_found", detail: "Thread not found" };
  return { ok: true, events: [{ type: "ThreadStateUpdated", data: { ...update, updated_at: now } }] };
}

/** Whether the thread may change its state now (not while a run is pending or running). */
export function threadIsBusy(state: ThreadState): boolean {
  return state.activeRuns.length > 0;
}

/**
 * Double-texting, the thread's rule: what accepting `run` means given the runs already active.
 * `reject` refuses; `enqueue` waits its turn; `interrupt`/`rollback` accept and name the runs to cancel.
 */
export function decideEnqueueRun(
  state: ThreadState | undefined,
  run: RunRecord,
  threadMetadata: JsonObject,
): (Decision & { ok: false }) | { ok: true; events: EventData[]; cancel: string[]; strategy: MultitaskStrategy } {
  const s = live(state);
  if (!s) return { ok: false, kind: "not_found", detail: "Thread not found" };
  const strategy = run.multitask_strategy;
  if (strategy === "reject" && s.activeRuns.length > 0) {
    return { ok: false, kind: "conflict", detail: "Thread is already running a task. Wait for it to finish or choose a different multitask strategy." };
  }
  const cancel = strategy === "interrupt" || strategy === "rollback" ? [...s.activeRuns] : [];
  return { ok: true, events: [{ type: "RunEnqueued", data: { run, thread_metadata: threadMetadata } }], cancel, strategy };
}
