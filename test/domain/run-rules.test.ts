import t from "tap";
import {
  MAX_ATTEMPTS,
  baseCheckpointOf,
  endedByFailure,
  endedOf,
  isUnclaimed,
  leaseExpiry,
  mayTakeOver,
  planClaim,
  resumesFromCheckpoint,
  startDelayMs,
  type RunOutcome,
} from "../../src/domain/run-rules.js";
import { emptyRunStream, runEventSchemas, type RunStreamState } from "../../src/domain/runs.js";
import type { RunRecord } from "../../src/domain/run-record.js";

/** The run worker's rules, without a worker: start, takeover, claim plan, outcome → RunEnded. */

const NOW = "2026-01-01T00:00:00.000+00:00";
const NOW_MS = Date.parse(NOW);
const run = (kwargs: Partial<RunRecord["kwargs"]> = {}): RunRecord => ({
  run_id: "r1",
  thread_id: "t1",
  assistant_id: "a1",
  created_at: NOW,
  updated_at: NOW,
  status: "pending",
  metadata: {},
  multitask_strategy: "enqueue",
  kwargs: { config: {}, context: {}, stream_mode: ["values"], temporary: false, subgraphs: false, resumable: false, ...kwargs },
});
const claimed = (over: Partial<RunStreamState> = {}): RunStreamState => ({ revision: 0n, attempt: 1, owner: "w1", lease_expires_at: NOW_MS + 1000, ...over });

t.test("start: now, or once not_before has passed", async (t) => {
  t.equal(startDelayMs(run(), NOW_MS), 0);
  t.equal(startDelayMs(run({ not_before: "2026-01-01T00:00:05.000+00:00" }), NOW_MS), 5000);
  t.equal(startDelayMs(run({ not_before: "2026-01-01T00:00:05.000+00:00" }), NOW_MS + 5000), 0);
  t.equal(startDelayMs(run({ not_before: "2026-01-01T00:00:05.000+00:00" }), NOW_MS + 9000), 0, "never negative");
  t.ok(isUnclaimed(emptyRunStream));
  t.notOk(isUnclaimed(claimed()));
  t.notOk(isUnclaimed({ ...emptyRunStream, ended: { status: "interrupted", ended_at: NOW } }), "cancelled before it started");
});

t.test("takeover: exclusive store takes every other owner's claim; a shared one only expired leases", async (t) => {
  const shared = { owner: "w2", nowMs: NOW_MS, exclusiveStore: false };
  const exclusive = { ...shared, exclusiveStore: true };
  t.notOk(mayTakeOver(claimed(), shared), "lease still held");
  t.ok(mayTakeOver(claimed(), exclusive), "exclusive: its owner is a dead process");
  t.ok(mayTakeOver(claimed(), { ...shared, nowMs: NOW_MS + 1000 }), "lease expired (at its expiry instant)");
  t.ok(mayTakeOver(claimed({ lease_expires_at: undefined }), shared), "no lease: expired");
  t.notOk(mayTakeOver(claimed(), { ...exclusive, owner: "w1" }), "never our own claim");
  t.notOk(mayTakeOver(emptyRunStream, exclusive), "nothing to take over: unclaimed");
  t.notOk(mayTakeOver(claimed({ ended: { status: "success", ended_at: NOW } }), exclusive), "an ended run");
  t.equal(leaseExpiry(NOW_MS, 30_000), NOW_MS + 30_000);
});

t.test("claim plan: a fresh claim executes with a metadata chunk", async (t) => {
  const plan = planClaim(emptyRunStream, { runId: "r1", takeover: false });
  t.same(plan, { attempt: 1, first: [{ type: "RunOutput", data: { event: "metadata", data: { run_id: "r1", attempt: 1 } } }] });
  const again = planClaim(claimed({ attempt: 2 }), { runId: "r1", takeover: true });
  t.equal(again.attempt, 3);
  t.equal(again.end, undefined, "a takeover within MAX_ATTEMPTS resumes");
  t.ok(runEventSchemas.RunOutput.safeParse(again.first[0].data).success);
});

t.test("claim plan: a run cancelled while its worker was down ends at once, no output", async (t) => {
  t.same(planClaim(claimed({ cancel: "rollback" }), { runId: "r1", takeover: true }), {
    attempt: 2,
    first: [],
    end: { status: "rollback", reason: "cancelled while its worker was down" },
  });
  t.equal(
    planClaim(claimed({ cancel: "interrupt", attempt: MAX_ATTEMPTS }), { runId: "r1", takeover: true }).end?.status,
    "interrupted",
    "cancel wins over giving up",
  );
});

t.test("claim plan: gives up after MAX_ATTEMPTS dead workers", async (t) => {
  const plan = planClaim(claimed({ attempt: MAX_ATTEMPTS }), { runId: "r1", takeover: true });
  const error = { error: "RunAttemptsExhausted", message: `run abandoned after ${MAX_ATTEMPTS} attempts whose workers died` };
  t.same(plan, {
    attempt: MAX_ATTEMPTS + 1,
    first: [{ type: "RunOutput", data: { event: "error", data: error } }],
    end: { status: "error", error, reason: error.message },
  });
  t.equal(planClaim(claimed({ attempt: 1 }), { runId: "r1", takeover: true, maxAttempts: 1 }).end?.status, "error", "the limit is a parameter");
  t.equal(planClaim({ ...emptyRunStream, attempt: MAX_ATTEMPTS }, { runId: "r1", takeover: false }).end, undefined, "only a takeover gives up");
});

t.test("base checkpoint and resumption", async (t) => {
  t.equal(baseCheckpointOf(emptyRunStream, "c5"), "c5", "first attempt: the thread's latest");
  t.equal(baseCheckpointOf(claimed({ base_checkpoint_id: null }), "c5"), null, "kept from the first attempt, even none");
  t.equal(baseCheckpointOf(claimed({ base_checkpoint_id: "c1" }), "c5"), "c1");
  t.ok(resumesFromCheckpoint(true, "c5", "c1"), "taken over after it checkpointed");
  t.notOk(resumesFromCheckpoint(true, "c1", "c1"), "taken over before its first checkpoint: starts over");
  t.notOk(resumesFromCheckpoint(false, "c5", "c1"), "a fresh claim never resumes");
});

t.test("outcome → RunEnded: the graph's own outcome, naming a dead worker it resumed from", async (t) => {
  const cmd = { endedAt: NOW };
  const success: RunOutcome = { status: "success", values: { n: 1 } };
  t.same(endedOf(success, {}, cmd), { status: "success", values: { n: 1 }, ended_at: NOW });
  t.same(endedOf(success, {}, { ...cmd, recoveredFrom: "w1" }), {
    reason: "resumed after its worker w1 died",
    status: "success",
    values: { n: 1 },
    ended_at: NOW,
  });
  const interrupted: RunOutcome = { status: "interrupted", values: { n: 2 }, interrupts: { node: [{ value: "?" }] } };
  t.same(endedOf(interrupted, {}, cmd), { status: "interrupted", values: { n: 2 }, interrupts: { node: [{ value: "?" }] }, ended_at: NOW });
  const failed: RunOutcome = { status: "error", error: { error: "ValueError", message: "boom" }, aborted: false, values: { n: 3 } };
  t.same(endedOf(failed, {}, cmd), { status: "error", error: { error: "ValueError", message: "boom" }, ended_at: NOW }, "an error keeps no values");
});

t.test("outcome → RunEnded: a cancel wins, then a timeout", async (t) => {
  const cmd = { endedAt: NOW, recoveredFrom: "w1" };
  const aborted: RunOutcome = { status: "error", error: { error: "AbortError", message: "aborted" }, aborted: true, values: { n: 4 } };
  t.same(
    endedOf(aborted, { cancel: "interrupt" }, cmd),
    { status: "interrupted", reason: "cancelled (interrupt)", ended_at: NOW, values: { n: 4 } },
    "interrupted keeps the work done",
  );
  t.same(endedOf(aborted, { cancel: "rollback" }, cmd), { status: "rollback", reason: "cancelled (rollback)", ended_at: NOW }, "rollback keeps nothing");
  t.same(
    endedOf({ ...aborted, values: undefined }, { cancel: "interrupt" }, cmd),
    { status: "interrupted", reason: "cancelled (interrupt)", ended_at: NOW },
    "no values key when none",
  );
  t.same(endedOf(aborted, { timedOut: true, timeoutMs: 1500 }, cmd), {
    status: "timeout",
    reason: "run exceeded BG_JOB_TIMEOUT_SECS",
    error: { error: "TimeoutError", message: "run exceeded 1.5s" },
    ended_at: NOW,
  });
  t.equal(endedOf(aborted, { timedOut: true, cancel: "interrupt" }, cmd).status, "interrupted", "a cancel that raced the timeout wins");
  for (const stop of [{}, { cancel: "interrupt" as const }, { timedOut: true }]) {
    t.ok(runEventSchemas.RunEnded.safeParse(endedOf(aborted, stop, cmd)).success, `a valid RunEnded (${JSON.stringify(stop)})`);
  }
});

t.test("a run whose outputs the log refused ends with that error", async (t) => {
  const error = new RangeError("too large");
  t.same(endedByFailure(error, NOW), { status: "error", error: { error: "RangeError", message: "too large" }, ended_at: NOW });
});
