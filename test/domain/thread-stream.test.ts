import t from "tap";
import {
  endsRunStream,
  endsThreadStream,
  parseThreadStreamLastEventId,
  runEnqueuedBy,
  runEventOutputs,
  threadEventOutputs,
  threadStreamEventId,
  ThreadStreamModesSchema,
} from "../../src/domain/thread-stream.js";

/** The thread stream's pure part: modes, what each mode sends for an event of the log, the ids. */

const RUN = "0190a000-0000-7000-8000-000000000001";
const THREAD = "0190a000-0000-7000-8000-0000000000aa";

t.test("stream_mode: repeated keys, comma lists, the default, unknown modes refused", async (t) => {
  t.same(ThreadStreamModesSchema.parse(undefined), ["run_modes"]);
  t.same(ThreadStreamModesSchema.parse([]), ["run_modes"]);
  t.same(ThreadStreamModesSchema.parse("lifecycle"), ["lifecycle"]);
  t.same(ThreadStreamModesSchema.parse(["lifecycle", "state_update,run_modes", "lifecycle"]), ["lifecycle", "state_update", "run_modes"]);
  const bad = ThreadStreamModesSchema.safeParse(["run_modes", "values"]);
  t.notOk(bad.success);
  t.match(bad.error?.issues[0]?.message, /unknown thread stream mode "values"/);
});

t.test("ids: the thread event is <revision>-0, its run's event at k is <revision>-(k+1); they parse back", async (t) => {
  t.equal(threadStreamEventId(7n), "7-0");
  t.equal(threadStreamEventId(7n, 0n), "7-1");
  t.equal(threadStreamEventId(7n, 41n), "7-42");
  t.same(parseThreadStreamLastEventId(threadStreamEventId(7n)), { kind: "after", thread: 7n });
  t.same(parseThreadStreamLastEventId(threadStreamEventId(7n, 41n)), { kind: "after", thread: 7n, run: 41n });
  t.same(parseThreadStreamLastEventId(["1-1", "12-3"]), { kind: "after", thread: 12n, run: 2n }, "the last header wins");
  t.equal(parseThreadStreamLastEventId(undefined), undefined, "absent: from now");
  t.equal(parseThreadStreamLastEventId("  "), undefined);
  t.same(parseThreadStreamLastEventId("-"), { kind: "beginning" });
  t.same(parseThreadStreamLastEventId("-1"), { kind: "beginning" });
  for (const bad of ["abc", "3", "1-2-3", "-5", "1.5-2", "99999999999999999999-1"]) {
    t.match(parseThreadStreamLastEventId(bad), { error: /Last-Event-ID/ }, bad);
  }
});

t.test("run events: run_modes sends the run's chunks and run_done; lifecycle its starts and end", async (t) => {
  const output = { type: "RunOutput", data: { event: "values", data: { a: 1 } } };
  const claimed = { type: "RunClaimed", data: { attempt: 2, owner: "w", claimed_at: "", lease_expires_at: 0 } };
  const ended = { type: "RunEnded", data: { status: "interrupted", ended_at: "" } };
  const renewed = { type: "RunLeaseRenewed", data: { owner: "w", lease_expires_at: 1 } };
  const done = { event: "metadata", data: { status: "run_done", run_id: RUN, run_status: "interrupted" } };
  const started = { event: "metadata", data: { status: "run_started", run_id: RUN, attempt: 2 } };

  t.same(runEventOutputs(["run_modes"], RUN, output), [{ event: "values", data: { a: 1 } }]);
  t.same(runEventOutputs(["run_modes"], RUN, claimed), []);
  t.same(runEventOutputs(["run_modes"], RUN, ended), [done]);
  t.same(runEventOutputs(["lifecycle"], RUN, output), []);
  t.same(runEventOutputs(["lifecycle"], RUN, claimed), [started]);
  t.same(runEventOutputs(["lifecycle"], RUN, ended), [done]);
  t.same(runEventOutputs(["run_modes", "lifecycle"], RUN, ended), [done], "run_done once for both modes");
  t.same(runEventOutputs(["state_update"], RUN, output), []);
  t.same(runEventOutputs(["state_update"], RUN, ended), []);
  t.same(runEventOutputs(["run_modes", "lifecycle"], RUN, renewed), [], "lease renewals send nothing");
  t.ok(endsRunStream(ended));
  t.notOk(endsRunStream(output));
});

t.test("thread events: state_update for a state changed outside a runs; RunEnqueued names its run; deletion ends", async (t) => {
  const updated = { type: "ThreadStateUpdated", data: { values: { x: 1 }, interrupts: {}, next: ["n"], updated_at: "2026-01-01T00:00:00+00:00" } };
  t.same(threadEventOutputs(["state_update"], THREAD, updated), [
    { event: "state_update", data: { thread_id: THREAD, state: { values: { x: 1 }, next: ["n"], interrupts: {}, created_at: "2026-01-01T00:00:00+00:00" } } },
  ]);
  t.same(threadEventOutputs(["run_modes", "lifecycle"], THREAD, updated), []);
  t.same(threadEventOutputs(["state_update"], THREAD, { type: "ThreadUpdated", data: { metadata: {}, updated_at: "" } }), []);
  t.equal(runEnqueuedBy({ type: "RunEnqueued", data: { run: { run_id: RUN }, thread_metadata: {} } }), RUN);
  t.equal(runEnqueuedBy(updated), undefined);
  t.ok(endsThreadStream({ type: "ThreadDeleted", data: {} }));
  t.ok(endsThreadStream({ type: "ThreadPurged", data: {} }));
  t.notOk(endsThreadStream({ type: "RunFinished", data: {} }));
});
