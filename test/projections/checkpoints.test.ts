import t from "tap";
import {
  checkpointEventSchemas,
  checkpointStream,
  type CheckpointSaved,
  type PendingWritesSaved,
  type SerializedValue,
} from "../../src/domain/checkpoint-events.js";
import type { RecordedEvent } from "../../src/eventstore/types.js";
import {
  blobOf,
  checkpointOf,
  checkpointsNewestFirst,
  checkpointsProjection,
  describeThread,
  latestCheckpointOf,
  namespaceOf,
  namespacesOf,
  pendingWritesOf,
  answerable,
  snapshotOf,
  stateFromSnapshot,
  type NamespaceCheckpoints,
  type ThreadCheckpoints,
} from "../../projections/checkpoints.js";
import { applyEvent } from "../../projections/projection.js";

// Hand-built events: no store, no I/O.
let position = 0n;
const revisions = new Map<string, bigint>();
function recorded(threadId: string, type: string, data: unknown): RecordedEvent {
  const streamId = checkpointStream(threadId);
  const revision = revisions.get(streamId) ?? 0n;
  revisions.set(streamId, revision + 1n);
  position += 1n;
  return {
    streamId,
    id: `00000000-0000-4000-8000-${position.toString().padStart(12, "0")}`,
    type,
    revision,
    position,
    data,
    metadata: {},
    created: new Date(0),
  };
}

const json = (value: unknown): [string, string] => ["json", Buffer.from(JSON.stringify(value)).toString("base64")];

function saved(
  threadId: string,
  id: string,
  opts: {
    ns?: string;
    parent?: string | null;
    versions?: Record<string, number>;
    blobs?: Record<string, [number, unknown]>;
    source?: string;
  } = {},
): RecordedEvent {
  const data: CheckpointSaved = {
    thread_id: threadId,
    checkpoint_ns: opts.ns ?? "",
    checkpoint_id: id,
    parent_checkpoint_id: opts.parent ?? null,
    checkpoint: { v: 4, id, ts: "2024-01-01T00:00:00.000Z", channel_versions: opts.versions ?? {}, versions_seen: {} },
    metadata: { source: opts.source ?? "loop", step: 0, parents: {} },
    blobs: Object.entries(opts.blobs ?? {}).map(([channel, [version, value]]) => ({
      channel,
      version,
      value: value === undefined ? null : json(value),
    })),
  };
  return recorded(threadId, "CheckpointSaved", data);
}

function writes(
  threadId: string,
  checkpointId: string,
  taskId: string,
  items: [idx: number, channel: string, value: unknown][],
  opts: { ns?: string; taskPath?: string } = {},
): RecordedEvent {
  const data: PendingWritesSaved = {
    thread_id: threadId,
    checkpoint_ns: opts.ns ?? "",
    checkpoint_id: checkpointId,
    task_id: taskId,
    task_path: opts.taskPath ?? "",
    writes: items.map(([idx, channel, value]) => ({ idx, channel, value: json(value) })),
  };
  return recorded(threadId, "PendingWritesSaved", data);
}

function fold(events: RecordedEvent[], initial?: ThreadCheckpoints): ThreadCheckpoints | undefined {
  return events.reduce<ThreadCheckpoints | undefined>((s, e) => checkpointsProjection.evolve(s, e), initial);
}

function ns(state: ThreadCheckpoints | undefined, name = ""): NamespaceCheckpoints {
  const found = state && namespaceOf(state, name);
  if (!found) throw new Error(`no namespace ${JSON.stringify(name)}`);
  return found;
}

const decoded = (v: SerializedValue | null | undefined) => (v ? JSON.parse(Buffer.from(v[1] as string, "base64").toString("utf8")) : v);

const history = () => [
  saved("t1", "c1", { versions: { messages: 1, count: 1 }, blobs: { messages: [1, ["hi"]], count: [1, 1] }, source: "input" }),
  writes("t1", "c1", "task-a", [[0, "messages", ["hello"]]]),
  saved("t1", "c2", { parent: "c1", versions: { messages: 2, count: 1 }, blobs: { messages: [2, ["hi", "hello"]] } }),
  saved("t1", "s1", { ns: "sub:1", versions: { x: 1 }, blobs: { x: [1, "x"] } }),
  writes(
    "t1",
    "c2",
    "task-b",
    [
      [0, "count", 2],
      [1, "messages", ["bye"]],
    ],
    { taskPath: "~__pregel_pull, b" },
  ),
  saved("t1", "c3", { parent: "c2", versions: { messages: 2, count: 2 }, blobs: { count: [2, undefined] } }),
];

t.test("the catalogue validates checkpoint events", async (t) => {
  const all = history();
  for (const e of all) t.ok(checkpointEventSchemas[e.type].safeParse(e.data).success, `${e.type} is valid`);
  const bad = structuredClone(all[0].data) as CheckpointSaved;
  bad.checkpoint.id = "other";
  t.notOk(checkpointEventSchemas.CheckpointSaved.safeParse(bad).success, "checkpoint.id must match checkpoint_id");
  t.notOk(
    checkpointEventSchemas.PendingWritesSaved.safeParse({ ...(all[1].data as object), writes: [{ idx: 0.5, channel: "c", value: ["json", ""] }] }).success,
    "write index must be an integer",
  );
  t.ok(checkpointEventSchemas.CheckpointsDeleted.safeParse({ thread_id: "t1" }).success);
  t.ok(checkpointEventSchemas.CheckpointsCopied.safeParse({ thread_id: "t2", from_thread_id: "t1", checkpoints: 0 }).success);
  t.equal(checkpointStream("abc"), "checkpoints-abc");
});

t.test("keys by thread id of checkpoints-* streams only", async (t) => {
  const e = saved("thread-42", "c1");
  t.equal(checkpointsProjection.key(e), "thread-42");
  t.equal(checkpointsProjection.key({ ...e, streamId: "thread-42" }), undefined);
  t.same(checkpointsProjection.streamPrefixes, ["checkpoints-"]);
});

t.test("builds checkpoints per namespace, blobs by channel+version, writes per checkpoint", async (t) => {
  const state = fold(history());
  t.ok(state);
  t.equal(state!.thread_id, "t1");
  t.same(namespacesOf(state!), ["", "sub:1"]);

  const root = ns(state);
  t.equal(latestCheckpointOf(root)?.checkpoint_id, "c3");
  t.same(
    checkpointsNewestFirst(root).map((c) => c.checkpoint_id),
    ["c3", "c2", "c1"],
  );
  t.equal(checkpointOf(root, "c2")?.parent_checkpoint_id, "c1");
  t.equal(checkpointOf(root, "c1")?.parent_checkpoint_id, null);
  t.equal(checkpointOf(root, "c1")?.metadata.source, "input");
  t.equal(checkpointOf(root, "nope"), undefined);

  t.same(decoded(blobOf(root, "messages", 1)), ["hi"]);
  t.same(decoded(blobOf(root, "messages", 2)), ["hi", "hello"]);
  t.equal(blobOf(root, "count", 2), null, "an empty channel is recorded as null");
  t.equal(blobOf(root, "count", 3), undefined, "an unknown version is undefined");
  t.equal(blobOf(root, "messages", "1" as unknown as number), undefined, "1 and '1' are different versions");

  t.same(
    pendingWritesOf(root, "c2").map((w) => [w.task_id, w.idx, w.channel, decoded(w.value)]),
    [
      ["task-b", 0, "count", 2],
      ["task-b", 1, "messages", ["bye"]],
    ],
  );
  t.same(pendingWritesOf(root, "c3"), []);

  const sub = ns(state, "sub:1");
  t.equal(latestCheckpointOf(sub)?.checkpoint_id, "s1");
  t.equal(blobOf(sub, "messages", 1), undefined, "blobs are per namespace");
});

t.test("latest is the greatest id, whatever the arrival order", async (t) => {
  const state = fold([saved("t9", "b"), saved("t9", "c"), saved("t9", "a")]);
  t.equal(latestCheckpointOf(ns(state))?.checkpoint_id, "c");
  t.same(
    checkpointsNewestFirst(ns(state)).map((c) => c.checkpoint_id),
    ["c", "b", "a"],
  );
});

t.test("a checkpoint saved again is replaced; a blob written again keeps its first value", async (t) => {
  const state = fold([
    saved("t3", "c1", { versions: { a: 1 }, blobs: { a: [1, "first"] }, source: "input" }),
    saved("t3", "c1", { versions: { a: 1 }, blobs: { a: [1, "second"] }, source: "update" }),
  ]);
  const root = ns(state);
  t.equal(checkpointsNewestFirst(root).length, 1);
  t.equal(checkpointOf(root, "c1")?.metadata.source, "update");
  t.same(decoded(blobOf(root, "a", 1)), "first");
});

t.test("pending writes: regular writes are idempotent, special ones are replaced, order is writesSortKey", async (t) => {
  const state = fold([
    saved("t4", "c1"),
    writes("t4", "c1", "task-z", [[0, "a", "z0"]], { taskPath: "b" }),
    writes(
      "t4",
      "c1",
      "task-y",
      [
        [0, "a", "y0"],
        [1, "a", "y1"],
      ],
      { taskPath: "a" },
    ),
    writes("t4", "c1", "task-y", [[0, "a", "retried"]], { taskPath: "a" }),
    writes("t4", "c1", "task-y", [[-1, "__error__", "boom"]], { taskPath: "a" }),
    writes("t4", "c1", "task-y", [[-1, "__error__", "boom again"]], { taskPath: "a" }),
    writes("t4", "c1", "input", [[0, "a", "in"]]),
  ]);
  t.same(
    pendingWritesOf(ns(state), "c1").map((w) => [w.task_path, w.task_id, w.idx, decoded(w.value)]),
    [
      ["", "input", 0, "in"],
      ["a", "task-y", -1, "boom again"],
      ["a", "task-y", 0, "y0"],
      ["a", "task-y", 1, "y1"],
      ["b", "task-z", 0, "z0"],
    ],
  );
});

t.test("writes for a checkpoint not (yet) saved are kept", async (t) => {
  const state = fold([writes("t5", "c0", "task", [[0, "a", 1]])]);
  t.equal(pendingWritesOf(ns(state), "c0").length, 1);
  t.equal(latestCheckpointOf(ns(state)), undefined);
});

t.test("folding the same events twice from scratch gives deep-equal read models", async (t) => {
  const events = [...history(), recorded("t1", "CheckpointsCopied", { thread_id: "t1", from_thread_id: "x", checkpoints: 1 }), ...history()];
  const once = fold(events);
  const twice = fold(events);
  t.not(once, twice);
  t.same(once, twice, "raw states are equal");
  t.same(describeThread(once), describeThread(twice), "views are equal");

  // Through the runner's applyEvent as well, with events of other streams mixed in.
  const models1 = new Map<string, Map<string, unknown>>();
  const models2 = new Map<string, Map<string, unknown>>();
  const other: RecordedEvent = { ...events[0], streamId: "thread-t1", type: "ThreadCreated" };
  for (const e of [other, ...events]) applyEvent([checkpointsProjection], models1, e);
  for (const e of [other, ...events]) applyEvent([checkpointsProjection], models2, e);
  t.same(models1, models2);
  t.same([...models1.get("checkpoints")!.keys()], ["t1"]);
});

t.test("evolve is pure: earlier states never change, forks are independent", async (t) => {
  const events = history();
  const base = fold(events.slice(0, 3))!;
  const pictureOfBase = JSON.stringify(describeThread(base));

  const next = fold(events.slice(3), base)!;
  t.equal(JSON.stringify(describeThread(base)), pictureOfBase, "base unchanged after folding on");
  t.not(JSON.stringify(describeThread(next)), pictureOfBase);

  // Fork: two different continuations of the same state.
  const left = checkpointsProjection.evolve(base, saved("t1", "c9-left", { parent: "c2" }))!;
  const right = checkpointsProjection.evolve(base, saved("t1", "c9-right", { parent: "c2" }))!;
  t.equal(JSON.stringify(describeThread(base)), pictureOfBase, "base unchanged after forks");
  t.same(
    checkpointsNewestFirst(ns(left)).map((c) => c.checkpoint_id),
    ["c9-left", "c2", "c1"],
  );
  t.same(
    checkpointsNewestFirst(ns(right)).map((c) => c.checkpoint_id),
    ["c9-right", "c2", "c1"],
  );
  t.same(
    checkpointsNewestFirst(ns(next)).map((c) => c.checkpoint_id),
    ["c3", "c2", "c1"],
  );

  // The event itself is not mutated either.
  const e = saved("t1", "c10");
  const before = structuredClone(e.data);
  checkpointsProjection.evolve(next, e);
  t.same(e.data, before);
});

t.test("per-event work is constant: successive states share their journals", async (t) => {
  let state: ThreadCheckpoints | undefined;
  const n = 2000;
  let previous: NamespaceCheckpoints | undefined;
  let shared = 0;
  for (let i = 0; i < n; i += 1) {
    const id = `c${String(i).padStart(5, "0")}`;
    state = checkpointsProjection.evolve(state, saved("big", id, { versions: { counter: i + 1 }, blobs: { counter: [i + 1, i] } }));
    const current = ns(state);
    if (previous && previous.checkpoints.journal === current.checkpoints.journal) shared += 1;
    previous = current;
  }
  t.equal(shared, n - 1, "no copy of the checkpoint map per event");
  t.equal(ns(state).checkpoints.journal.log.length, n);
  t.equal(latestCheckpointOf(ns(state))?.checkpoint_id, "c01999");
  t.same(decoded(blobOf(ns(state), "counter", 1000)), 999);
});

t.test("CheckpointsDeleted removes the thread; later saves start afresh", async (t) => {
  const state = fold(history());
  t.equal(checkpointsProjection.evolve(state, recorded("t1", "CheckpointsDeleted", { thread_id: "t1" })), undefined);

  const models = new Map<string, Map<string, unknown>>();
  const events = [...history(), recorded("t1", "CheckpointsDeleted", { thread_id: "t1" })];
  for (const e of events) applyEvent([checkpointsProjection], models, e);
  t.equal(models.get("checkpoints")!.has("t1"), false, "the runner drops the entity");

  const reborn = fold([recorded("t1", "CheckpointsDeleted", { thread_id: "t1" }), saved("t1", "n1")]);
  t.same(
    checkpointsNewestFirst(ns(reborn)).map((c) => c.checkpoint_id),
    ["n1"],
  );
  t.same(namespacesOf(reborn!), [""]);
});

t.test("CheckpointsCopied replaces the target with the copied events that follow it", async (t) => {
  const target = fold([saved("t2", "old-1"), saved("t2", "old-2", { ns: "sub" })]);
  const copyEvents = [
    recorded("t2", "CheckpointsCopied", { thread_id: "t2", from_thread_id: "t1", checkpoints: 2 }),
    saved("t2", "c1", { versions: { messages: 1 }, blobs: { messages: [1, ["hi"]] } }),
    writes("t2", "c1", "task-a", [[0, "messages", ["hello"]]]),
    saved("t2", "c2", { parent: "c1", versions: { messages: 2 }, blobs: { messages: [2, ["hi", "hello"]] } }),
  ];
  const copied = fold(copyEvents, target)!;
  t.equal(copied.copied_from, "t1");
  t.same(namespacesOf(copied), [""], "the target's own checkpoints are gone");
  t.same(
    checkpointsNewestFirst(ns(copied)).map((c) => c.checkpoint_id),
    ["c2", "c1"],
  );
  t.same(decoded(blobOf(ns(copied), "messages", 2)), ["hi", "hello"]);
  t.equal(pendingWritesOf(ns(copied), "c1").length, 1);

  // A copy into a thread that never existed gives the same read model.
  t.same(describeThread(fold(copyEvents)), describeThread(copied));
});

t.test("unknown event types on the stream leave the state as it was", async (t) => {
  const state = fold(history());
  t.equal(checkpointsProjection.evolve(state, recorded("t1", "SomethingElse", {})), state);
  t.equal(checkpointsProjection.evolve(undefined, recorded("t1", "SomethingElse", {})), undefined);
});

t.test("snapshots: a state folded from one answers the latest reads like the full fold, and knows what it cannot answer", async (t) => {
  const before = history();
  const full = fold(before);
  const content = snapshotOf(full);
  t.ok(content, "a complete state always has a snapshot");
  // The content is JSON (it is stored as such): a round trip changes nothing.
  const partial = stateFromSnapshot(JSON.parse(JSON.stringify(content)));
  t.ok(partial.partial);
  t.same(namespacesOf(partial), namespacesOf(full!), "every namespace");
  for (const name of namespacesOf(full!)) {
    t.same(latestCheckpointOf(ns(partial, name)), latestCheckpointOf(ns(full, name)), `latest of ${JSON.stringify(name)}`);
    t.ok(answerable(partial, name), `latest of ${JSON.stringify(name)} is answerable`);
  }
  t.same(blobOf(ns(partial), "messages", 2), blobOf(ns(full), "messages", 2), "the blobs the latest reads");
  t.same(pendingWritesOf(ns(partial), "c3"), pendingWritesOf(ns(full), "c3"));
  t.notOk(answerable(partial, "", "c1"), "an older checkpoint is not held");
  t.ok(answerable(partial, "", "c3"));
  t.ok(answerable(partial, "absent"), "a namespace absent from the snapshot has no latest");
  t.notOk(answerable(partial, "absent", "c1"));
  t.ok(answerable(full, "", "c1"), "a complete state answers everything");

  // Events after the snapshot fold onto it like onto the full state.
  const after = [
    writes("t1", "c3", "task-c", [[0, "count", 3]]),
    saved("t1", "c4", { parent: "c3", versions: { messages: 3, count: 2 }, blobs: { messages: [3, ["m3"]] } }),
  ];
  const fullAfter = fold(after, full);
  const partialAfter = fold(after, partial);
  t.same(latestCheckpointOf(ns(partialAfter)), latestCheckpointOf(ns(fullAfter)));
  t.same(pendingWritesOf(ns(partialAfter), "c3"), pendingWritesOf(ns(fullAfter), "c3"));
  t.ok(answerable(partialAfter, ""));

  // A rollback to after the horizon keeps the latest known; one past it makes it stale.
  const discard = (ids: string[]) =>
    recorded("t1", "CheckpointsDiscarded", { thread_id: "t1", checkpoints: ids.map((id) => ({ checkpoint_ns: "", checkpoint_id: id })) });
  const rolledBack = fold([discard(["c4"])], partialAfter);
  t.equal(latestCheckpointOf(ns(rolledBack))?.checkpoint_id, "c3");
  t.ok(answerable(rolledBack, ""), "the horizon itself is still there");
  const pastHorizon = fold([discard(["c4", "c3"])], partialAfter);
  t.ok(ns(pastHorizon).stale, "the true latest (c2) is older than the snapshot");
  t.notOk(answerable(pastHorizon, ""), "so the latest must be read from the history");
  t.equal(snapshotOf(pastHorizon), undefined, "and a stale state makes no snapshot");
  t.equal(latestCheckpointOf(ns(fold([discard(["c4", "c3"])], fullAfter)))?.checkpoint_id, "c2", "(the full fold knows)");

  // A snapshot event changes nothing in a forward fold.
  t.equal(fold([recorded("t1", "CheckpointsSnapshot", { thread_id: "t1", ref: {}, checkpoints: 1 })], full), full);
});
