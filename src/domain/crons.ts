import * as z from "zod";
import type { EventsOf } from "./event-types.js";
import type { Decision } from "./decision.js";
import { RunRequestSchema } from "./run-request.js";
import { nextTick } from "./cron-schedule.js";
import { JsonObjectSchema } from "../util/json.js";
import { isoOf } from "../util/time.js";

/**
 * Crons: one stream `cron-{cron_id}`. Every tick that fires is a CronFired appended with the
 * stream's expected revision, so across processes each tick fires exactly once; the run it
 * starts is then recorded (CronRunCreated) or its refusal (CronRunFailed).
 */
export const CRON_STREAM_PREFIX = "cron-";
export const cronStream = (cronId: string) => `${CRON_STREAM_PREFIX}${cronId}`;

const Obj = JsonObjectSchema;

/**
 * What each tick's run is created with: the run-create fields a cron carries, validated as a run
 * request's. `stream_mode` takes any name, as crons always have (the log holds such payloads);
 * a tick's run asks only for the modes the server knows.
 */
export const CronPayloadSchema = RunRequestSchema.pick({
  input: true,
  config: true,
  context: true,
  metadata: true,
  webhook: true,
  multitask_strategy: true,
  interrupt_before: true,
  interrupt_after: true,
  stream_subgraphs: true,
  stream_resumable: true,
  durability: true,
  checkpoint_during: true,
}).extend({
  stream_mode: z.union([z.string(), z.array(z.string())]).optional(),
});
export type CronPayload = z.infer<typeof CronPayloadSchema>;

export const OnRunCompletedSchema = z.enum(["delete", "keep"]);

const CronFieldsSchema = z.object({
  assistant_id: z.string(),
  thread_id: z.string().nullable(),
  schedule: z.string(),
  timezone: z.string(),
  end_time: z.string().nullable(),
  enabled: z.boolean(),
  on_run_completed: OnRunCompletedSchema.nullable(),
  metadata: Obj,
  user_id: z.string().nullable(),
  payload: CronPayloadSchema,
});
export type CronFields = z.infer<typeof CronFieldsSchema>;

export const cronEventSchemas = {
  CronCreated: CronFieldsSchema.extend({ cron_id: z.string(), created_at: z.string() }),
  /** Changed fields only. A new schedule, time zone or re-enabling counts ticks from `updated_at`. */
  CronUpdated: CronFieldsSchema.partial().extend({ updated_at: z.string() }),
  /** One tick, claimed: exactly one appender wins its expected revision. */
  CronFired: z.object({ tick: z.string(), owner: z.string(), fired_at: z.string() }),
  CronRunCreated: z.object({ tick: z.string(), run_id: z.string(), thread_id: z.string() }),
  CronRunFailed: z.object({ tick: z.string(), error: z.string() }),
  CronDeleted: z.object({ deleted_at: z.string() }),
} satisfies Record<string, z.ZodType>;

export type CronEvent = EventsOf<typeof cronEventSchemas>;

export interface CronState extends CronFields {
  cron_id: string;
  revision: bigint;
  created_at: string;
  updated_at: string;
  /** Ticks are counted after this instant (creation, or the last schedule change / re-enabling), ms. */
  anchor_ms: number;
  /** The last tick fired, ms; null when none yet. */
  last_tick_ms: number | null;
  /**
   * Ticks claimed (CronFired) whose run is not recorded yet, with when they were claimed (ms). A
   * claimer records its tick's run at once; one that died in between leaves its tick here, and any
   * process completes it once UNRECORDED_TICK_GRACE_MS have passed (see tickToComplete).
   */
  unrecorded_ticks?: { tick_ms: number; fired_at_ms: number }[];
}

/** How long a claimed tick may stay without its run before another process creates the run. */
export const UNRECORDED_TICK_GRACE_MS = 10 * 60_000;

/** At most this many unrecorded ticks are remembered (each one is a claimer that died mid-tick). */
const MAX_UNRECORDED_TICKS = 32;

/** The oldest claimed tick whose run another process should now create, or null. */
export function tickToComplete(s: CronState, nowMs: number): number | null {
  const due = (s.unrecorded_ticks ?? []).find((t) => t.fired_at_ms + UNRECORDED_TICK_GRACE_MS <= nowMs);
  return due ? due.tick_ms : null;
}

/** When the scheduler must look at the cron to complete an unrecorded tick (ms), or null. */
export function completionDueAt(s: CronState): number | null {
  const ticks = s.unrecorded_ticks ?? [];
  return ticks.length ? Math.min(...ticks.map((t) => t.fired_at_ms)) + UNRECORDED_TICK_GRACE_MS : null;
}

/**
 * The idempotency key of a tick's run: whoever creates it (its claimer, or a process completing
 * it), it is one run. It holds spaces, which an `Idempotency-Key` header may not: no client can
 * take a tick's key.
 */
export const tickRunKey = (cronId: string, tickMs: number) => `cron tick ${cronId} ${tickMs}`;

/** Pure fold of `cron-{id}`; undefined once deleted. */
export function evolveCron(state: CronState | undefined, event: CronEvent, revision: bigint): CronState | undefined {
  if (event.type === "CronCreated") {
    const { created_at, ...fields } = event.data;
    return { ...fields, revision, created_at, updated_at: created_at, anchor_ms: Date.parse(created_at), last_tick_ms: null };
  }
  if (!state) return undefined;
  switch (event.type) {
    case "CronUpdated": {
      const { updated_at, ...changes } = event.data;
      const next: CronState = { ...state, ...stripUndefined(changes), revision, updated_at };
      const reschedule =
        (changes.schedule !== undefined && changes.schedule !== state.schedule) ||
        (changes.timezone !== undefined && changes.timezone !== state.timezone) ||
        (changes.enabled === true && !state.enabled);
      return reschedule ? { ...next, anchor_ms: Date.parse(updated_at) } : next;
    }
    case "CronFired": {
      const tick = Date.parse(event.data.tick);
      const unrecorded = [...(state.unrecorded_ticks ?? []), { tick_ms: tick, fired_at_ms: Date.parse(event.data.fired_at) }].slice(-MAX_UNRECORDED_TICKS);
      return { ...state, revision, last_tick_ms: Math.max(state.last_tick_ms ?? -Infinity, tick), unrecorded_ticks: unrecorded };
    }
    case "CronRunCreated":
    case "CronRunFailed": {
      const tick = Date.parse(event.data.tick);
      return { ...state, revision, unrecorded_ticks: (state.unrecorded_ticks ?? []).filter((t) => t.tick_ms !== tick) };
    }
    case "CronDeleted":
      return undefined;
  }
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** The instant ticks are counted after. */
export const cronCursor = (s: CronState) => Math.max(s.anchor_ms, s.last_tick_ms ?? -Infinity);

/** When the next tick is due (ms), or null: disabled, past its end time, or a schedule that never fires again. */
export function nextRunOf(s: CronState): number | null {
  if (!s.enabled) return null;
  const next = nextTick(s.schedule, s.timezone, cronCursor(s));
  if (next === null) return null;
  if (s.end_time && next > Date.parse(s.end_time)) return null;
  return next;
}

/** Cron timestamps on the wire: ISO 8601 with the UTC offset (the Python server's form). */
export { isoOf };

/** The Cron object of the API (reference B.4). */
export function publicCron(s: CronState): Record<string, unknown> {
  const next = nextRunOf(s);
  return {
    cron_id: s.cron_id,
    assistant_id: s.assistant_id,
    thread_id: s.thread_id,
    on_run_completed: s.on_run_completed,
    end_time: s.end_time,
    schedule: s.schedule,
    timezone: s.timezone,
    created_at: s.created_at,
    updated_at: s.updated_at,
    user_id: s.user_id,
    payload: s.payload,
    next_run_date: next === null ? null : isoOf(next),
    metadata: s.metadata,
    enabled: s.enabled,
  };
}

// ---- deciders (pure) ----

export function decideUpdateCron(s: CronState | undefined, changes: Partial<CronFields>, now: string): Decision {
  if (!s) return { ok: false, kind: "not_found", detail: "Cron not found" };
  return { ok: true, events: [{ type: "CronUpdated", data: { ...stripUndefined(changes), updated_at: now } }] };
}

export function decideDeleteCron(s: CronState | undefined, now: string): Decision {
  if (!s) return { ok: false, kind: "not_found", detail: "Cron not found" };
  return { ok: true, events: [{ type: "CronDeleted", data: { deleted_at: now } }] };
}

/** Fire one tick: only an enabled cron, only a tick after the last one fired, never past its end. */
export function decideFire(s: CronState | undefined, tickMs: number, cmd: { owner: string; now: string }): Decision {
  if (!s) return { ok: false, kind: "not_found", detail: "cron deleted" };
  if (!s.enabled) return { ok: false, kind: "conflict", detail: "cron disabled" };
  if (tickMs <= cronCursor(s)) return { ok: false, kind: "conflict", detail: "tick already fired" };
  if (s.end_time && tickMs > Date.parse(s.end_time)) return { ok: false, kind: "conflict", detail: "past end_time" };
  return { ok: true, events: [{ type: "CronFired", data: { tick: isoOf(tickMs), owner: cmd.owner, fired_at: cmd.now } }] };
}
