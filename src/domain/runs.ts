import * as z from "zod";
import type { EventsOf } from "./event-types.js";
import type { Decision } from "./decision.js";
import type { EventData } from "../eventstore/types.js";
import type { RunRecord, RunStatus } from "./run-record.js";
import { FinalRunStatusSchema, type FinalRunStatus } from "./threads.js";
import { JsonObjectSchema } from "../util/json.js";

/**
 * Run streams: `run-{run_id}`. A run is accepted on its thread (RunEnqueued on `thread-{id}`);
 * its own stream then holds who claimed it, every streamed chunk (RunOutput, the SSE events),
 * cancel requests and exactly one terminal RunEnded. Claims and the terminal event are appended
 * with the expected revision of this stream, so exactly one worker wins and a run ends once.
 */
export const RUN_STREAM_PREFIX = "run-";
export const runStream = (runId: string) => `${RUN_STREAM_PREFIX}${runId}`;

/**
 * Streams written beside a run, each named `{prefix}{run_id}`: a value too large for one event, in chunks
 * (its input, its command, a streamed chunk's data, its final values). A purge of its thread removes them.
 */
export const RUN_INPUT_STREAM_PREFIX = "run-input-";
export const RUN_COMMAND_STREAM_PREFIX = "run-command-";
export const RUN_OUTPUT_STREAM_PREFIX = "run-output-";
export const RUN_VALUES_STREAM_PREFIX = "run-values-";
export const RUN_SIDE_STREAM_PREFIXES = [RUN_INPUT_STREAM_PREFIX, RUN_COMMAND_STREAM_PREFIX, RUN_OUTPUT_STREAM_PREFIX, RUN_VALUES_STREAM_PREFIX] as const;

const Obj = JsonObjectSchema;
export const CancelActionSchema = z.enum(["interrupt", "rollback"]);
export type CancelAction = z.infer<typeof CancelActionSchema>;
export const RunErrorSchema = z.object({ error: z.string(), message: z.string() });
export type RunError = z.infer<typeof RunErrorSchema>;

export const runEventSchemas = {
  /** A worker took the run. `lease_expires_at` (ms since epoch) bounds how long the claim holds without renewal. */
  RunClaimed: z.object({
    owner: z.string(),
    attempt: z.number().int().positive(),
    claimed_at: z.string(),
    lease_expires_at: z.number(),
    /** Set when the run was taken over from a dead owner and resumes from its last checkpoint. */
    recovered_from: z.string().optional(),
    /** The thread's latest checkpoint when the run first started: what a rollback returns to. */
    base_checkpoint_id: z.string().nullable().optional(),
  }),
  RunLeaseRenewed: z.object({ owner: z.string(), lease_expires_at: z.number() }),
  /** One streamed chunk, exactly as an SSE event: `event` name and JSON `data`. */
  RunOutput: z.object({ event: z.string(), data: z.unknown() }).strict(),
  /** Someone asked a running run to stop; its owner aborts the graph and ends it. */
  RunCancelRequested: z.object({ action: CancelActionSchema, requested_at: z.string() }),
  /** The run's one terminal event. `rollback` = cancelled and removed with its checkpoints. */
  RunEnded: z.object({
    status: FinalRunStatusSchema,
    values: z.unknown().optional(),
    /** Set when the graph stopped at an interrupt (interrupt(), interrupt_before/after): its tasks' interrupts, by task id. */
    interrupts: Obj.optional(),
    /**
     * The graph's last `values` chunk came after its interrupt (a task of the interrupted step wrote):
     * /wait and /join then answer the values, as the official servers answer the last `values` chunk.
     */
    values_after_interrupt: z.literal(true).optional(),
    error: RunErrorSchema.optional(),
    /** Why the run ended that way when it is not obvious (cancelled, recovered after a crash, …). */
    reason: z.string().optional(),
    ended_at: z.string(),
  }),
} satisfies Record<string, z.ZodType>;

export type RunStreamEvent = EventsOf<typeof runEventSchemas>;
export type RunEnded = z.infer<typeof runEventSchemas.RunEnded>;

/** What the run stream says, folded. */
export interface RunStreamState {
  /** Revision of the last event of `run-{id}`, or "no_stream". */
  revision: bigint | "no_stream";
  attempt: number;
  owner?: string;
  lease_expires_at?: number;
  cancel?: CancelAction;
  ended?: RunEnded;
  /** Latest checkpoint of the thread before the run's first attempt (null: none); undefined = never started. */
  base_checkpoint_id?: string | null;
}

export const emptyRunStream: RunStreamState = { revision: "no_stream", attempt: 0 };

/** Pure fold of one run stream. */
export function evolveRunStream(state: RunStreamState, event: RunStreamEvent, revision: bigint): RunStreamState {
  switch (event.type) {
    case "RunClaimed":
      return {
        ...state,
        revision,
        attempt: event.data.attempt,
        owner: event.data.owner,
        lease_expires_at: event.data.lease_expires_at,
        base_checkpoint_id: state.base_checkpoint_id !== undefined ? state.base_checkpoint_id : (event.data.base_checkpoint_id ?? null),
      };
    case "RunLeaseRenewed":
      return { ...state, revision, lease_expires_at: event.data.lease_expires_at };
    case "RunOutput":
      return state.revision === revision ? state : { ...state, revision };
    case "RunCancelRequested":
      return { ...state, revision, cancel: state.cancel ?? event.data.action };
    case "RunEnded":
      return { ...state, revision, ended: event.data };
  }
}

/** The status the API shows for a run, from its record and its stream. */
export function runStatusOf(s: RunStreamState): RunStatus {
  if (s.ended) return s.ended.status === "rollback" ? "interrupted" : s.ended.status;
  return s.owner ? "running" : "pending";
}

// ---- deciders (pure) ----

/**
 * Claim a run. A fresh run (never claimed) is claimable by anyone; a claimed one only when
 * `takeover` says its owner is dead (single-process store at startup, or its lease expired).
 */
export function decideClaim(
  s: RunStreamState,
  cmd: { owner: string; now: string; nowMs: number; leaseMs: number; takeover: boolean; baseCheckpointId: string | null },
): Decision {
  if (s.ended) return { ok: false, kind: "conflict", detail: "run already ended" };
  if (s.owner && !cmd.takeover) return { ok: false, kind: "conflict", detail: "run already claimed" };
  const data: z.infer<typeof runEventSchemas.RunClaimed> = {
    owner: cmd.owner,
    attempt: s.attempt + 1,
    claimed_at: cmd.now,
    lease_expires_at: cmd.nowMs + cmd.leaseMs,
  };
  if (s.owner) data.recovered_from = s.owner;
  else data.base_checkpoint_id = cmd.baseCheckpointId;
  return { ok: true, events: [{ type: "RunClaimed", data }] };
}

/**
 * Cancel: a run nobody claimed yet ends at once (interrupted, or removed for rollback); a claimed
 * one gets a request its owner acts on (abort the graph, then end it).
 */
export function decideCancel(s: RunStreamState, action: CancelAction, now: string): { ok: true; events: EventData[]; endsNow?: RunEnded } {
  if (s.ended) return { ok: true, events: [] };
  if (!s.owner) {
    const ended: RunEnded = { status: action === "rollback" ? "rollback" : "interrupted", reason: `cancelled (${action}) before it started`, ended_at: now };
    return { ok: true, events: [{ type: "RunEnded", data: ended }], endsNow: ended };
  }
  if (s.cancel) return { ok: true, events: [] };
  return { ok: true, events: [{ type: "RunCancelRequested", data: { action, requested_at: now } }] };
}

/** End a run: only its current owner may, and only once. */
export function decideEnd(s: RunStreamState, owner: string, ended: RunEnded): Decision {
  if (s.ended) return { ok: false, kind: "conflict", detail: "run already ended" };
  if (s.owner !== owner) return { ok: false, kind: "conflict", detail: `run is owned by ${s.owner ?? "nobody"}` };
  return { ok: true, events: [{ type: "RunEnded", data: ended }] };
}

/** What a run that ended looks like to the thread (the RunFinished mark). */
export function threadFinishOf(
  runId: string,
  ended: RunEnded,
): { run_id: string; status: FinalRunStatus; values?: unknown; interrupts?: Record<string, unknown>; error?: RunError; finished_at: string } {
  const out: ReturnType<typeof threadFinishOf> = { run_id: runId, status: ended.status, finished_at: ended.ended_at };
  if (ended.values !== undefined) out.values = ended.values;
  if (ended.interrupts !== undefined) out.interrupts = ended.interrupts;
  if (ended.error !== undefined) out.error = ended.error;
  return out;
}

// ---- the read model entity: one run ----

export interface RunView {
  run: RunRecord;
  stream: RunStreamState;
  /** The thread has its RunFinished mark (the run left the thread's active list). */
  threadFinished: boolean;
}

export function runViewOf(record: RunRecord): RunView {
  return { run: record, stream: emptyRunStream, threadFinished: false };
}

/** The run as the API shows it. */
export function publicRun(v: RunView): RunRecord {
  const status = runStatusOf(v.stream);
  return status === v.run.status ? v.run : { ...v.run, status };
}
