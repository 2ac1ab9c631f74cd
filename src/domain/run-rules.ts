/**
 * The run worker's rules (pure): when a run may start, when a claimed run may be taken over, what
 * a claim is appended with and when the worker gives a run up instead of executing it, and how
 * an execution's outcome becomes the run's one terminal event. The worker (runtime/worker.ts)
 * does the I/O: reads, appends, timers, the graph.
 */
import type { EventData } from "../eventstore/types.js";
import type { RunRecord } from "./run-record.js";
import type { CancelAction, RunEnded, RunError, RunStreamState } from "./runs.js";

/** A run whose worker died this many times is ended with an error instead of being resumed again. */
export const MAX_ATTEMPTS = 3;

/** How long (ms) until a run may start: its `not_before` (`after_seconds`), 0 when it may start now. */
export function startDelayMs(run: RunRecord, nowMs: number): number {
  const notBefore = run.kwargs.not_before ? Date.parse(run.kwargs.not_before) : 0;
  return Math.max(0, notBefore - nowMs);
}

/** Whether nobody has claimed the run yet and it has not ended: a fresh claim may take it. */
export function isUnclaimed(s: RunStreamState): boolean {
  return !s.owner && !s.ended;
}

/**
 * Whether `owner` may take over a run another owner claimed: that owner is dead. With an exclusive
 * store (single-process SQLite) every other owner's open claim is a dead process's; with a shared
 * store (ESDB) only a claim whose lease expired is.
 */
export function mayTakeOver(s: RunStreamState, cmd: { owner: string; nowMs: number; exclusiveStore: boolean }): boolean {
  if (s.ended || !s.owner || s.owner === cmd.owner) return false;
  return cmd.exclusiveStore || (s.lease_expires_at ?? 0) <= cmd.nowMs;
}

/** When a renewed lease expires. */
export const leaseExpiry = (nowMs: number, leaseMs: number): number => nowMs + leaseMs;

/** What the worker does with a run it claims. */
export interface ClaimPlan {
  /** The attempt the claim starts. */
  attempt: number;
  /** Appended with the claim, in the same append (one commit before the first byte). */
  first: EventData[];
  /** Set when the run is not executed but ended right after the claim (`ended_at` is the worker's to add). */
  end?: Omit<RunEnded, "ended_at">;
}

/**
 * A fresh claim executes the run (its stream opens with a `metadata` chunk). A takeover of a run
 * someone asked to cancel while its owner was gone ends it so; one whose workers died more than
 * MAX_ATTEMPTS times may be what kills them, so it is given up with an error.
 */
export function planClaim(s: RunStreamState, cmd: { runId: string; takeover: boolean; maxAttempts?: number }): ClaimPlan {
  const attempt = s.attempt + 1;
  if (cmd.takeover && s.cancel !== undefined) {
    return { attempt, first: [], end: { status: s.cancel === "rollback" ? "rollback" : "interrupted", reason: "cancelled while its worker was down" } };
  }
  if (cmd.takeover && attempt > (cmd.maxAttempts ?? MAX_ATTEMPTS)) {
    const error: RunError = { error: "RunAttemptsExhausted", message: `run abandoned after ${attempt - 1} attempts whose workers died` };
    return { attempt, first: [{ type: "RunOutput", data: { event: "error", data: error } }], end: { status: "error", error, reason: error.message } };
  }
  return { attempt, first: [{ type: "RunOutput", data: { event: "metadata", data: { run_id: cmd.runId, attempt } } }] };
}

/** The checkpoint a rollback returns to: the thread's latest before the run's first attempt. */
export function baseCheckpointOf(s: RunStreamState, latestCheckpointId: string | null): string | null {
  return s.base_checkpoint_id !== undefined ? s.base_checkpoint_id : latestCheckpointId;
}

/** A run taken over after a crash continues from its checkpoints when it made any. */
export function resumesFromCheckpoint(takeover: boolean, latestCheckpointId: string | null, base: string | null): boolean {
  return takeover && latestCheckpointId !== base;
}

/** How one execution of the graph ended (the runtime's report). */
export type RunOutcome =
  | { status: "success"; values: unknown }
  | { status: "interrupted"; values: unknown; interrupts: Record<string, unknown>; valuesAfterInterrupt?: boolean }
  | { status: "error"; error: RunError; aborted: boolean; values?: unknown };

/** Why the worker stopped the graph, if it did. */
export interface RunStop {
  cancel?: CancelAction;
  timedOut?: boolean;
  /** The timeout that was exceeded (ms). */
  timeoutMs?: number;
}

/**
 * The run's terminal event from its outcome. A cancel wins (interrupted keeps the work done so
 * far, rollback keeps nothing), then a timeout; otherwise the graph's own outcome, naming the dead
 * worker a taken-over run resumed from.
 */
export function endedOf(outcome: RunOutcome, stop: RunStop, cmd: { endedAt: string; recoveredFrom?: string }): RunEnded {
  const ended_at = cmd.endedAt;
  if (stop.cancel) {
    const values = stop.cancel === "rollback" ? undefined : outcome.values;
    return {
      status: stop.cancel === "rollback" ? "rollback" : "interrupted",
      reason: `cancelled (${stop.cancel})`,
      ended_at,
      ...(values !== undefined ? { values } : {}),
    };
  }
  if (stop.timedOut) {
    return {
      status: "timeout",
      reason: "run exceeded BG_JOB_TIMEOUT_SECS",
      error: { error: "TimeoutError", message: `run exceeded ${(stop.timeoutMs ?? 0) / 1000}s` },
      ended_at,
    };
  }
  const base = cmd.recoveredFrom ? { reason: `resumed after its worker ${cmd.recoveredFrom} died` } : {};
  switch (outcome.status) {
    case "success":
      return { ...base, status: "success", values: outcome.values, ended_at };
    case "interrupted":
      return {
        ...base,
        status: "interrupted",
        values: outcome.values,
        interrupts: outcome.interrupts,
        ended_at,
        ...(outcome.valuesAfterInterrupt ? { values_after_interrupt: true as const } : {}),
      };
    case "error":
      return { ...base, status: "error", error: outcome.error, ended_at };
  }
}

/** A run whose outputs the log refused ends with that error (never a hang with the claim held). */
export function endedByFailure(error: Error, endedAt: string): RunEnded {
  return { status: "error", error: { error: error.name ?? "Error", message: error.message }, ended_at: endedAt };
}
