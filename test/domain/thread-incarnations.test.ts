import t from "tap";
import { evolveIncarnations, incarnationsOf, indexIncarnations, type Incarnation } from "../../src/domain/thread-incarnations.js";
import { evolveThread, type ThreadEvent } from "../../src/domain/threads.js";
import type { RecordedEvent } from "../../src/eventstore/types.js";
import { PURGED_EVENT_TYPE } from "../../src/eventstore/types.js";
import { historyView } from "../../src/app/audit.js";

/** Incarnations of a thread id, without I/O: their boundaries, their metadata, which events are whose. */

const X = "7d3b2c1a-0000-4000-8000-00000000000a";
const THREAD = `thread-${X}`;
const CHECKPOINTS = `checkpoints-${X}`;

/** A log under construction: each event gets the next position, and the next revision of its stream. */
function logOf() {
  const events: RecordedEvent[] = [];
  const revisions = new Map<string, bigint>();
  const add = (streamId: string, type: string, data: unknown, metadata: Record<string, unknown> = {}) => {
    const revision = revisions.get(streamId) ?? 0n;
    revisions.set(streamId, revision + 1n);
    const e: RecordedEvent = {
      streamId,
      id: `e${events.length}`,
      type,
      revision,
      position: BigInt(events.length + 10),
      data,
      metadata,
      created: new Date(1_700_000_000_000 + events.length * 1000),
    };
    events.push(e);
    return e;
  };
  return { events, add };
}

const run = (runId: string) => ({
  run_id: runId,
  thread_id: X,
  assistant_id: "a",
  created_at: `C-${runId}`,
  updated_at: `C-${runId}`,
  status: "pending",
  metadata: {},
  multitask_strategy: "enqueue",
  kwargs: { config: {}, context: {}, stream_mode: ["values"], temporary: false, subgraphs: false, resumable: false },
});

/** Alice's thread with a run, deleted; bob's under the same id, whose run starts while alice's ends late; bob hands it to carol. */
function twoIncarnations() {
  const { events, add } = logOf();
  add(THREAD, "ThreadCreated", { thread_id: X, metadata: { owner: "alice" }, created_at: "T0" });
  add(THREAD, "RunEnqueued", { run: run("r1"), thread_metadata: { graph_id: "agent" } }, { correlation_id: "r1" });
  add(`run-r1`, "RunClaimed", { attempt: 1 });
  add(CHECKPOINTS, "CheckpointSaved", { secret: "alice" }, { correlation_id: "r1" });
  add(THREAD, "ThreadUpdated", { metadata: { owner: "alice", topic: "x" }, updated_at: "T1" });
  add(THREAD, "ThreadDeleted", { deleted_at: "T2" });
  add(CHECKPOINTS, "CheckpointsDeleted", { thread_id: X });
  add(THREAD, "ThreadCreated", { thread_id: X, metadata: { owner: "bob" }, created_at: "T3" });
  // Alice's run, cancelled by the deletion, writes and ends after bob's thread was created.
  add(CHECKPOINTS, "CheckpointSaved", { secret: "alice, late" }, { correlation_id: "r1" });
  add(`run-r1`, "RunEnded", { status: "interrupted" });
  add(THREAD, "RunFinished", { run_id: "r1", status: "interrupted", values: { secret: "alice" }, finished_at: "T4" }, { correlation_id: "r1" });
  add(THREAD, "RunEnqueued", { run: run("r2"), thread_metadata: {} }, { correlation_id: "r2" });
  add(CHECKPOINTS, "CheckpointSaved", { mine: "bob" }, { correlation_id: "r2" });
  add(CHECKPOINTS, "CheckpointsDiscarded", { thread_id: X, checkpoints: [] }, { correlation_id: X });
  add(THREAD, "ThreadUpdated", { metadata: { owner: "carol" }, updated_at: "T5" });
  return events;
}

t.test("each ThreadCreated starts an incarnation with its own metadata, as its later events leave it", async (t) => {
  const incarnations = incarnationsOf(X, twoIncarnations());
  t.same(
    incarnations.map((i) => [i.number, i.fromRevision, i.fromPosition]),
    [
      [1, 0n, 10n],
      [2, 4n, 17n],
    ],
  );
  t.same(incarnations[0].metadata, { owner: "alice", topic: "x" }, "the first as it last lived: its update, not its tombstone's empty metadata");
  t.equal(incarnations[0].thread?.deleted, true);
  t.same(incarnations[1].metadata, { owner: "carol" }, "the second's own, with its later update");
  t.equal(incarnations[1].thread?.deleted, false);
  t.same(incarnations[1].thread?.activeRuns, ["r2"]);
  t.equal(incarnations[1].thread?.thread.values, null, "the late end of alice's run brings her values into nothing of bob's");
  t.equal(incarnations[1].thread?.thread.status, "busy");
  t.ok(incarnations.every((i) => !i.purged));
});

t.test("the fold is persistent: an earlier state is never changed", async (t) => {
  const events = twoIncarnations().filter((e) => e.streamId === THREAD);
  let state: Incarnation[] | undefined;
  const states: Incarnation[][] = [];
  for (const e of events) states.push((state = evolveIncarnations(state, e)));
  const snapshot = JSON.stringify(states, (_k, v: unknown) => (typeof v === "bigint" ? String(v) : v));
  evolveIncarnations(states[states.length - 1], {
    streamId: THREAD,
    type: "ThreadDeleted",
    data: { deleted_at: "T9" },
    revision: 99n,
    position: 999n,
    metadata: {},
  });
  t.equal(
    JSON.stringify(states, (_k, v: unknown) => (typeof v === "bigint" ? String(v) : v)),
    snapshot,
  );
  t.same(
    states.map((s) => s.length),
    [1, 1, 1, 1, 2, 2, 2, 2],
  );
});

t.test("every event of the history belongs to one incarnation: runs to the one that enqueued them", async (t) => {
  const events = twoIncarnations();
  const index = indexIncarnations(X, events);
  const owner = (e: RecordedEvent) => index.numberOf(e);
  const of = (type: string, streamPrefix: string) => events.filter((e) => e.type === type && e.streamId.startsWith(streamPrefix)).map(owner);
  t.same(of("ThreadCreated", "thread-"), [1, 2]);
  t.same(of("CheckpointSaved", "checkpoints-"), [1, 1, 2], "alice's run's late checkpoint is hers, by its run");
  t.same(of("RunEnded", "run-"), [1]);
  t.same(of("RunFinished", "thread-"), [1], "the late mark of her run too, though written in bob's revisions");
  t.same(of("CheckpointsDeleted", "checkpoints-"), [1], "outside a run: by position");
  t.same(of("CheckpointsDiscarded", "checkpoints-"), [2]);
  t.same(of("ThreadUpdated", "thread-"), [1, 2]);
  const early = { streamId: CHECKPOINTS, type: "CheckpointSaved", data: {}, revision: 0n, position: 1n, metadata: {} };
  t.equal(index.numberOf(early), 1, "before the first creation: the first incarnation's");
  t.equal(indexIncarnations(X, []).numberOf(early), 0, "an id never created has none");
});

t.test("a purge on the embedded log: tombstones keep the boundaries, every incarnation is purged", async (t) => {
  const { events, add } = logOf();
  const tomb = (stream: string, type: string, correlation?: string) =>
    add(stream, PURGED_EVENT_TYPE, { purged_type: type }, correlation ? { correlation_id: correlation } : {});
  tomb(THREAD, "ThreadCreated");
  tomb(THREAD, "RunEnqueued", "r1");
  tomb("run-r1", "RunEnded", "r1");
  tomb(THREAD, "ThreadDeleted");
  tomb(THREAD, "ThreadCreated");
  tomb(THREAD, "ThreadDeleted");
  add(THREAD, "ThreadPurged", { thread_id: X, purged_at: "T5", purged_by: "op", streams: 3, run_ids: ["r1"] });
  add(THREAD, "ThreadCreated", { thread_id: X, metadata: { owner: "dave" }, created_at: "T6" });
  const index = indexIncarnations(X, events);
  t.same(
    index.incarnations.map((i) => [i.number, i.purged, i.metadata]),
    [
      [1, true, undefined],
      [2, true, undefined],
      [3, false, { owner: "dave" }],
    ],
  );
  t.equal(index.incarnations[1].thread?.purged, true, "the purge's record folds into the incarnation it ended");
  t.equal(index.numberOf(events[2]), 1, "a purged run's tombstone still follows its run");
  t.equal(index.numberOf(events[6]), 2);
});

t.test("a purge on EventStoreDB: the record of the purge is all that is left of the earlier ones", async (t) => {
  const purged = {
    streamId: THREAD,
    id: "p",
    type: "ThreadPurged",
    data: { thread_id: X, purged_at: "T5", purged_by: "op", streams: 3 },
    revision: 7n,
    position: 70n,
    metadata: {},
    created: new Date(),
  };
  const created = { ...purged, id: "c", type: "ThreadCreated", data: { thread_id: X, metadata: {}, created_at: "T6" }, revision: 8n, position: 80n };
  const incarnations = incarnationsOf(X, [purged, created]);
  t.same(
    incarnations.map((i) => [i.number, i.fromRevision, i.purged]),
    [
      [1, 7n, true],
      [2, 8n, false],
    ],
  );
  t.equal(incarnations[0].thread?.deleted, true);
});

t.test("a run's end changes only a thread waiting for it", async (t) => {
  const created = evolveThread(undefined, { type: "ThreadCreated", data: { thread_id: X, metadata: {}, created_at: "T0" } }, 0n);
  const finished: ThreadEvent = {
    type: "RunFinished",
    data: { run_id: "elsewhere", status: "error", values: { leaked: true }, error: { error: "E", message: "m" }, finished_at: "T1" },
  };
  const after = evolveThread(created, finished, 1n);
  t.same(after, { ...created, revision: 1n }, "only the revision moves");
});

t.test("what a caller may see: each incarnation judged by its own metadata", async (t) => {
  const events = twoIncarnations();
  const seen = (filters: Record<string, string> | undefined, only?: number) => historyView(X, events, filters, only);
  t.same(
    seen({ owner: "alice" }).incarnations.map((i) => i.number),
    [1],
  );
  t.same(
    seen({ owner: "carol" }).incarnations.map((i) => i.number),
    [2],
  );
  t.same(
    seen({ owner: "bob" }).incarnations.map((i) => i.number),
    [],
    "bob handed his over: nothing is his now",
  );
  t.same(
    seen(undefined).incarnations.map((i) => i.number),
    [1, 2],
  );
  t.same(
    seen(undefined, 2).incarnations.map((i) => i.number),
    [2],
  );
  t.same(seen({ owner: "alice" }, 2).incarnations, []);
  const text = (events: RecordedEvent[]) => JSON.stringify(events.map((e) => [e.streamId, e.data, e.metadata]));
  const alices = text(seen({ owner: "alice" }).events);
  t.notOk(alices.includes("bob") || alices.includes("r2"), "none of bob's events");
  t.ok(alices.includes("alice, late"), "her run's late checkpoint is hers");
  t.notOk(text(seen({ owner: "carol" }).events).includes("alice"), "nothing of alice's in the second");
});
