import t from "tap";
import {
  decideCreateThread,
  decideDeleteThread,
  decideEnqueueRun,
  decidePatchThread,
  decideUpdateThreadState,
  evolveThread,
  threadEventSchemas,
  threadIsBusy,
  type ThreadEvent,
  type ThreadState,
} from "../../src/domain/threads.js";
import type { RunRecord } from "../../src/domain/run-record.js";
import type { EventData } from "../../src/eventstore/types.js";

/** The thread aggregate without I/O, including the double-texting rule of run creation. */

const TID = "7d3b2c1a-0000-4000-8000-000000000001";

function fold(state: ThreadState | undefined, events: EventData[]): ThreadState {
  let s = state;
  for (const e of events) {
    t.ok(threadEventSchemas[e.type as keyof typeof threadEventSchemas].safeParse(e.data).success, `${e.type} satisfies its schema`);
    s = evolveThread(s, e as ThreadEvent, (s?.revision ?? -1n) + 1n);
  }
  return s!;
}

function ok(decision: { ok: boolean; events?: EventData[]; detail?: string }): EventData[] {
  if (!decision.ok) throw new Error(decision.detail);
  return decision.events!;
}

const run = (id: string, strategy: RunRecord["multitask_strategy"] = "enqueue"): RunRecord => ({
  run_id: id,
  thread_id: TID,
  assistant_id: "a",
  created_at: `C-${id}`,
  updated_at: `C-${id}`,
  status: "pending",
  metadata: {},
  multitask_strategy: strategy,
  kwargs: { config: {}, context: {}, stream_mode: ["values"], temporary: false, subgraphs: false, resumable: false },
});

const created = () => fold(undefined, ok(decideCreateThread(undefined, { thread_id: TID, metadata: { a: 1 }, if_exists: "raise" }, "T0")));

t.test("a new thread is idle with empty config, null values and no interrupts", async (t) => {
  const s = created();
  t.same(s.thread, {
    thread_id: TID,
    created_at: "T0",
    updated_at: "T0",
    state_updated_at: "T0",
    metadata: { a: 1 },
    status: "idle",
    config: {},
    values: null,
    interrupts: {},
  });
  t.same(decideCreateThread(s, { thread_id: TID, metadata: {}, if_exists: "raise" }, "T1"), { ok: false, kind: "conflict", detail: "Thread already exists" });
  t.same(decideCreateThread(s, { thread_id: TID, metadata: {}, if_exists: "do_nothing" }, "T1"), { ok: true, events: [] });
});

t.test("patch merges metadata; delete makes a tombstone", async (t) => {
  let s = fold(created(), ok(decidePatchThread(created(), { b: 2 }, "T1")));
  t.same(s.thread.metadata, { a: 1, b: 2 });
  t.equal(s.thread.updated_at, "T1");
  s = fold(s, ok(decideDeleteThread(s, "T2")));
  t.equal(s.deleted, true);
  t.same(decidePatchThread(s, {}, "T3"), { ok: false, kind: "not_found", detail: "Thread not found" });
});

t.test("runs make the thread busy; status after the last run follows its outcome", async (t) => {
  let s = created();
  s = fold(s, ok(decideEnqueueRun(s, run("r1"), { graph_id: "agent", assistant_id: "a" })));
  t.equal(s.thread.status, "busy");
  t.same(s.thread.metadata, { a: 1, graph_id: "agent", assistant_id: "a" }, "run creation stamps the thread metadata");
  t.ok(threadIsBusy(s));
  s = fold(s, ok(decideEnqueueRun(s, run("r2"), {})));
  t.same(s.activeRuns, ["r1", "r2"], "FIFO");
  s = fold(s, [{ type: "RunFinished", data: { run_id: "r1", status: "error", error: { error: "E", message: "m" }, finished_at: "T3" } }]);
  t.equal(s.thread.status, "busy", "still busy while r2 is pending");
  s = fold(s, [
    {
      type: "RunFinished",
      data: { run_id: "r2", status: "interrupted", values: { x: 1 }, interrupts: { task: [{ id: "i", value: "q" }] }, finished_at: "T4" },
    },
  ]);
  t.equal(s.thread.status, "interrupted");
  t.same(s.thread.values, { x: 1 });
  t.same(s.thread.interrupts, { task: [{ id: "i", value: "q" }] });
  s = fold(s, ok(decideEnqueueRun(s, run("r3"), {})));
  s = fold(s, [{ type: "RunFinished", data: { run_id: "r3", status: "success", values: { x: 2 }, finished_at: "T5" } }]);
  t.equal(s.thread.status, "idle");
  t.same(s.thread.interrupts, {}, "a successful run clears interrupts");
  s = fold(s, ok(decideEnqueueRun(s, run("r4"), {})));
  s = fold(s, [{ type: "RunFinished", data: { run_id: "r4", status: "error", error: { error: "E", message: "boom" }, finished_at: "T6" } }]);
  t.equal(s.thread.status, "error");
});

t.test("double-texting: reject refuses, enqueue waits, interrupt and rollback name the runs to cancel", async (t) => {
  let s = created();
  t.same((decideEnqueueRun(s, run("x", "reject"), {}) as { cancel: string[] }).cancel, [], "reject on an idle thread is accepted");
  s = fold(s, ok(decideEnqueueRun(s, run("r1"), {})));
  t.same(decideEnqueueRun(s, run("r2", "reject"), {}), {
    ok: false,
    kind: "conflict",
    detail: "Thread is already running a task. Wait for it to finish or choose a different multitask strategy.",
  });
  const enqueue = decideEnqueueRun(s, run("r2", "enqueue"), {});
  t.same(enqueue.ok && enqueue.cancel, []);
  const interrupt = decideEnqueueRun(s, run("r2", "interrupt"), {});
  t.same(interrupt.ok && interrupt.cancel, ["r1"]);
  const rollback = decideEnqueueRun(s, run("r2", "rollback"), {});
  t.same(rollback.ok && rollback.cancel, ["r1"]);
  t.same(decideEnqueueRun(undefined, run("r9"), {}), { ok: false, kind: "not_found", detail: "Thread not found" });
});

t.test("state updates set values, interrupts and resting status", async (t) => {
  let s = created();
  s = fold(s, ok(decideUpdateThreadState(s, { values: { m: [1] }, interrupts: { t1: [{ id: "i", value: 1 }] } }, "T1")));
  t.equal(s.thread.status, "interrupted");
  t.same(s.thread.values, { m: [1] });
  t.equal(s.thread.state_updated_at, "T1");
  s = fold(s, ok(decideUpdateThreadState(s, { values: { m: [1, 2] }, interrupts: {} }, "T2")));
  t.equal(s.thread.status, "idle");
});

t.test("a state update keeps an interrupted thread interrupted while its next tasks remain", async (t) => {
  const created = fold(undefined, ok(decideCreateThread(undefined, { thread_id: TID, metadata: {}, if_exists: "raise" }, "2025-01-01T00:00:00+00:00")));
  const interrupted = fold(created, ok(decideUpdateThreadState(created, { values: {}, interrupts: { task: [{ id: "i", value: 1 }] }, next: ["ask"] }, "t1")));
  t.equal(interrupted.thread.status, "interrupted");
  const edited = fold(interrupted, ok(decideUpdateThreadState(interrupted, { values: { a: 1 }, interrupts: {}, next: ["ask"] }, "t2")));
  t.equal(edited.thread.status, "interrupted", "next tasks remain");
  const finished = fold(edited, ok(decideUpdateThreadState(edited, { values: { a: 2 }, interrupts: {}, next: [] }, "t3")));
  t.equal(finished.thread.status, "idle", "nothing left to run");
  const idle = fold(finished, ok(decideUpdateThreadState(finished, { values: { a: 3 }, interrupts: {}, next: ["b"] }, "t4")));
  t.equal(idle.thread.status, "idle", "an idle thread does not become interrupted by an update");
  const legacy = fold(interrupted, ok(decideUpdateThreadState(interrupted, { values: {}, interrupts: {} }, "t5")));
  t.equal(legacy.thread.status, "idle", "events without next (written before) fold as before");
});
