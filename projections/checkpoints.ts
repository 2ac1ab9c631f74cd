import { compareWritesSortKeys, writesSortKey } from "@langchain/langgraph-checkpoint";
import type { RecordedEvent } from "../src/eventstore/types.js";
import {
  CHECKPOINT_STREAM_PREFIX,
  threadIdOfCheckpointStream,
  type CheckpointEvent,
  type CheckpointsDiscarded,
  type CheckpointSaved,
  type PendingWritesSaved,
  type SerializedValue,
  type StoredCheckpointJson,
} from "../src/domain/checkpoint-events.js";
import type { Projection } from "./projection.js";

// ---------------------------------------------------------------------------------------------
// A persistent map: immutable to whoever holds a version, yet O(1) amortised per `set`.
//
// Successive versions share one append-only journal; a version sees only the first `length`
// entries. `set` on the newest version appends to the shared journal, which older versions cannot
// see. `set` on an older version (a fork, e.g. folding one state twice) first copies that
// version's prefix, so no version ever observes a change. This keeps `evolve` pure while a thread
// with thousands of checkpoints still costs constant work per event (a copy-on-write object or
// Map would make rebuilding a thread quadratic in its length).
// ---------------------------------------------------------------------------------------------

interface Journal<V> {
  readonly log: [key: string, value: V][];
  /** Key → indexes in `log` where it was set, ascending. */
  readonly index: Map<string, number[]>;
}

export interface PMap<V> {
  readonly journal: Journal<V>;
  /** Number of journal entries this version sees. */
  readonly length: number;
}

export function pmapEmpty<V>(): PMap<V> {
  return { journal: { log: [], index: new Map() }, length: 0 };
}

export function pmapGet<V>(map: PMap<V>, key: string): V | undefined {
  const at = map.journal.index.get(key);
  if (!at) return undefined;
  for (let i = at.length - 1; i >= 0; i -= 1) if (at[i] < map.length) return map.journal.log[at[i]][1];
  return undefined;
}

export function pmapHas<V>(map: PMap<V>, key: string): boolean {
  const at = map.journal.index.get(key);
  return at !== undefined && at[0] < map.length;
}

export function pmapSet<V>(map: PMap<V>, key: string, value: V): PMap<V> {
  let journal = map.journal;
  if (journal.log.length !== map.length) {
    // A fork: someone already extended the journal past this version. Copy our prefix.
    const log = journal.log.slice(0, map.length);
    const index = new Map<string, number[]>();
    log.forEach(([k], i) => {
      const at = index.get(k);
      if (at) at.push(i);
      else index.set(k, [i]);
    });
    journal = { log, index };
  }
  const i = journal.log.length;
  journal.log.push([key, value]);
  const at = journal.index.get(key);
  if (at) at.push(i);
  else journal.index.set(key, [i]);
  return { journal, length: i + 1 };
}

/** Visible keys, in order of first insertion. */
export function pmapKeys<V>(map: PMap<V>): string[] {
  const keys = new Set<string>();
  for (let i = 0; i < map.length; i += 1) keys.add(map.journal.log[i][0]);
  return [...keys];
}

/** Visible [key, current value] pairs, in order of first insertion. */
export function pmapEntries<V>(map: PMap<V>): [string, V][] {
  return pmapKeys(map).map((k) => [k, pmapGet(map, k) as V]);
}

// ---------------------------------------------------------------------------------------------
// The read model: per thread, what getTuple / list need.
// ---------------------------------------------------------------------------------------------

export interface CheckpointEntry {
  readonly checkpoint_id: string;
  readonly parent_checkpoint_id: string | null;
  /** The checkpoint without `channel_values`, as serialized JSON. */
  readonly checkpoint: StoredCheckpointJson;
  /** Serialized JSON of the metadata. */
  readonly metadata: Record<string, unknown>;
}

export interface WriteEntry {
  readonly task_id: string;
  readonly task_path: string;
  readonly idx: number;
  readonly channel: string;
  readonly value: SerializedValue;
}

export interface NamespaceCheckpoints {
  /** By checkpoint id. */
  readonly checkpoints: PMap<CheckpointEntry>;
  /** The greatest checkpoint id: what getTuple returns when no id is asked for. */
  readonly latest: string;
  /** By `blobKey(channel, version)`; first write wins. null = the channel was empty at that version. */
  readonly blobs: PMap<SerializedValue | null>;
  /** By checkpoint id, then `writeKey(task_id, idx)`. */
  readonly writes: PMap<PMap<WriteEntry>>;
  /**
   * Set in a state folded from a snapshot: the snapshot's latest checkpoint id. Checkpoints older
   * than it (and their writes) may be missing; everything saved after the snapshot is here.
   */
  readonly horizon?: string;
  /** A discard removed a checkpoint at or before the horizon: `latest` can no longer be trusted. */
  readonly stale?: boolean;
}

export interface ThreadCheckpoints {
  readonly thread_id: string;
  /** By checkpoint_ns ("" = root graph), in order of first appearance. */
  readonly namespaces: PMap<NamespaceCheckpoints>;
  /** Set when the thread's checkpoints were copied from another thread. */
  readonly copied_from: string | null;
  /** Folded from a snapshot, not from the start of the stream: see `horizon` and `answerable`. */
  readonly partial?: boolean;
}

/** Version types matter (1 and "1" are different versions), so the key keeps them apart. */
export function blobKey(channel: string, version: number | string): string {
  return JSON.stringify([channel, version]);
}

export function writeKey(taskId: string, idx: number): string {
  return JSON.stringify([taskId, idx]);
}

function emptyThread(threadId: string, copiedFrom: string | null): ThreadCheckpoints {
  return { thread_id: threadId, namespaces: pmapEmpty(), copied_from: copiedFrom };
}

function emptyNamespace(): NamespaceCheckpoints {
  return { checkpoints: pmapEmpty(), latest: "", blobs: pmapEmpty(), writes: pmapEmpty() };
}

function withNamespace(state: ThreadCheckpoints, ns: string, next: NamespaceCheckpoints): ThreadCheckpoints {
  return { ...state, namespaces: pmapSet(state.namespaces, ns, next) };
}

function saveCheckpoint(state: ThreadCheckpoints, data: CheckpointSaved): ThreadCheckpoints {
  const ns = pmapGet(state.namespaces, data.checkpoint_ns) ?? emptyNamespace();
  let blobs = ns.blobs;
  for (const blob of data.blobs) {
    const key = blobKey(blob.channel, blob.version);
    if (!pmapHas(blobs, key)) blobs = pmapSet(blobs, key, blob.value);
  }
  const entry: CheckpointEntry = {
    checkpoint_id: data.checkpoint_id,
    parent_checkpoint_id: data.parent_checkpoint_id,
    checkpoint: data.checkpoint,
    metadata: data.metadata,
  };
  return withNamespace(state, data.checkpoint_ns, {
    ...ns,
    checkpoints: pmapSet(ns.checkpoints, data.checkpoint_id, entry),
    latest: data.checkpoint_id > ns.latest ? data.checkpoint_id : ns.latest,
    blobs,
  });
}

/**
 * MemorySaver's rule: a regular write (idx >= 0) already stored under (task_id, idx) is kept, so a
 * retried putWrites changes nothing; a special write (negative idx from WRITES_IDX_MAP) replaces it.
 */
function saveWrites(state: ThreadCheckpoints, data: PendingWritesSaved): ThreadCheckpoints {
  const ns = pmapGet(state.namespaces, data.checkpoint_ns) ?? emptyNamespace();
  const before = pmapGet(ns.writes, data.checkpoint_id) ?? pmapEmpty<WriteEntry>();
  let forCheckpoint = before;
  for (const w of data.writes) {
    const key = writeKey(data.task_id, w.idx);
    if (w.idx >= 0 && pmapHas(forCheckpoint, key)) continue;
    forCheckpoint = pmapSet(forCheckpoint, key, {
      task_id: data.task_id,
      task_path: data.task_path,
      idx: w.idx,
      channel: w.channel,
      value: w.value,
    });
  }
  if (forCheckpoint === before) return state;
  return withNamespace(state, data.checkpoint_ns, {
    ...ns,
    writes: pmapSet(ns.writes, data.checkpoint_id, forCheckpoint),
  });
}

/** Drops the listed checkpoints (and their pending writes); `latest` becomes the greatest id left. */
function discardCheckpoints(state: ThreadCheckpoints, data: CheckpointsDiscarded): ThreadCheckpoints {
  let next = state;
  const byNs = new Map<string, Set<string>>();
  for (const c of data.checkpoints) {
    const ids = byNs.get(c.checkpoint_ns) ?? new Set<string>();
    ids.add(c.checkpoint_id);
    byNs.set(c.checkpoint_ns, ids);
  }
  for (const [nsName, ids] of byNs) {
    const ns = pmapGet(next.namespaces, nsName);
    if (!ns) continue;
    let checkpoints = pmapEmpty<CheckpointEntry>();
    let latest = "";
    for (const [id, entry] of pmapEntries(ns.checkpoints)) {
      if (ids.has(id)) continue;
      checkpoints = pmapSet(checkpoints, id, entry);
      if (id > latest) latest = id;
    }
    let writes = pmapEmpty<PMap<WriteEntry>>();
    for (const [id, w] of pmapEntries(ns.writes)) if (!ids.has(id)) writes = pmapSet(writes, id, w);
    // Older checkpoints than the horizon are not here: if one was discarded, the true latest may be one of them.
    const stale = ns.stale || (ns.horizon !== undefined && [...ids].some((id) => id <= (ns.horizon as string)));
    next = withNamespace(next, nsName, {
      checkpoints,
      latest,
      blobs: ns.blobs,
      writes,
      ...(ns.horizon === undefined ? {} : { horizon: ns.horizon }),
      ...(stale ? { stale } : {}),
    });
  }
  return next;
}

export function evolveCheckpoints(state: ThreadCheckpoints | undefined, event: CheckpointEvent, threadId: string): ThreadCheckpoints | undefined {
  switch (event.type) {
    case "CheckpointSaved":
      return saveCheckpoint(state ?? emptyThread(threadId, null), event.data);
    case "PendingWritesSaved":
      return saveWrites(state ?? emptyThread(threadId, null), event.data);
    case "CheckpointsDeleted":
      return undefined;
    case "CheckpointsCopied":
      // The copied data follows in the same append; whatever the target held before is replaced.
      return emptyThread(threadId, event.data.from_thread_id);
    case "CheckpointsDiscarded":
      return state && discardCheckpoints(state, event.data);
    case "CheckpointsSnapshot":
      // A summary of what came before: the forward fold already has it (a miss starts from it).
      return state;
    default:
      return state;
  }
}

/**
 * Checkpoints, blobs and pending writes per thread, keyed by thread id, from `checkpoints-*`.
 * Not in the server's global runner (it would keep every thread forever): the checkpointer folds
 * one thread's stream with `evolveCheckpoints` on demand. This form folds many streams at once
 * (tests, tools).
 */
export const checkpointsProjection: Projection<ThreadCheckpoints> = {
  name: "checkpoints",
  streamPrefixes: [CHECKPOINT_STREAM_PREFIX],
  key: (event: RecordedEvent) => threadIdOfCheckpointStream(event.streamId),
  evolve: (state, event) =>
    evolveCheckpoints(state, { type: event.type, data: event.data } as CheckpointEvent, threadIdOfCheckpointStream(event.streamId) ?? ""),
};

// ---------------------------------------------------------------------------------------------
// Snapshots: what a cache miss needs, so that it costs the latest state, not the whole history.
// ---------------------------------------------------------------------------------------------

export interface SnapshotNamespace {
  readonly checkpoint_ns: string;
  /** The namespace's latest checkpoint. */
  readonly checkpoint: CheckpointEntry;
  /** Every blob the latest checkpoint's channel_versions name: `[channel, version, value]`. */
  readonly blobs: [channel: string, version: number | string, value: SerializedValue | null][];
  /** Pending writes of the latest checkpoint and of checkpoints not saved (yet): `[checkpoint_id, writes]`. */
  readonly writes: [checkpointId: string, writes: WriteEntry[]][];
}

/** The content of a `CheckpointsSnapshot` (kept in its own stream). */
export interface SnapshotContent {
  readonly thread_id: string;
  readonly copied_from: string | null;
  readonly namespaces: SnapshotNamespace[];
}

/**
 * The snapshot of a state, or undefined when the state cannot vouch for it (a partial state whose
 * latest is stale or whose latest checkpoint reads a blob it does not hold): then the caller
 * snapshots the full fold instead.
 */
export function snapshotOf(state: ThreadCheckpoints | undefined): SnapshotContent | undefined {
  if (!state) return undefined;
  const namespaces: SnapshotNamespace[] = [];
  for (const nsName of namespacesOf(state)) {
    const ns = namespaceOf(state, nsName) as NamespaceCheckpoints;
    if (ns.stale) return undefined;
    const latest = latestCheckpointOf(ns);
    if (!latest) continue; // no checkpoint left: a namespace without one reads as absent
    const blobs: SnapshotNamespace["blobs"] = [];
    for (const [channel, version] of Object.entries(latest.checkpoint.channel_versions)) {
      const value = blobOf(ns, channel, version);
      if (value === undefined) {
        if (state.partial) return undefined;
        continue;
      }
      blobs.push([channel, version, value]);
    }
    const writes: SnapshotNamespace["writes"] = [];
    for (const id of pmapKeys(ns.writes)) {
      if (id === latest.checkpoint_id || !pmapHas(ns.checkpoints, id)) writes.push([id, pendingWritesOf(ns, id)]);
    }
    namespaces.push({ checkpoint_ns: nsName, checkpoint: latest, blobs, writes });
  }
  return { thread_id: state.thread_id, copied_from: state.copied_from, namespaces };
}

/** The partial state a snapshot stands for; events after the snapshot fold onto it as usual. */
export function stateFromSnapshot(content: SnapshotContent): ThreadCheckpoints {
  let namespaces = pmapEmpty<NamespaceCheckpoints>();
  for (const n of content.namespaces) {
    let blobs = pmapEmpty<SerializedValue | null>();
    for (const [channel, version, value] of n.blobs) blobs = pmapSet(blobs, blobKey(channel, version), value);
    let writes = pmapEmpty<PMap<WriteEntry>>();
    for (const [id, list] of n.writes) {
      let forCheckpoint = pmapEmpty<WriteEntry>();
      for (const w of list) forCheckpoint = pmapSet(forCheckpoint, writeKey(w.task_id, w.idx), w);
      writes = pmapSet(writes, id, forCheckpoint);
    }
    namespaces = pmapSet(namespaces, n.checkpoint_ns, {
      checkpoints: pmapSet(pmapEmpty<CheckpointEntry>(), n.checkpoint.checkpoint_id, n.checkpoint),
      latest: n.checkpoint.checkpoint_id,
      blobs,
      writes,
      horizon: n.checkpoint.checkpoint_id,
    });
  }
  return { thread_id: content.thread_id, namespaces, copied_from: content.copied_from, partial: true };
}

/**
 * Whether a read of `checkpointId` (the latest when undefined) in `nsName` gets the same answer
 * from this state as from the full fold. A complete state always does. A partial one does when
 * the checkpoint is held, every blob it reads is held, and (for the latest) `latest` is not stale;
 * a namespace it does not have has no checkpoint in the full fold either. Old-format checkpoints
 * (v < 4) also read their parent's writes, which a partial state may lack.
 */
export function answerable(state: ThreadCheckpoints | undefined, nsName: string, checkpointId?: string): boolean {
  if (!state || !state.partial) return true;
  const ns = namespaceOf(state, nsName);
  if (!ns) return checkpointId === undefined;
  if (checkpointId === undefined && ns.stale) return false;
  const entry = checkpointId === undefined ? latestCheckpointOf(ns) : checkpointOf(ns, checkpointId);
  if (!entry) return checkpointId === undefined && ns.latest === "";
  if (entry.checkpoint.v < 4 && entry.parent_checkpoint_id !== null) return false;
  return Object.entries(entry.checkpoint.channel_versions).every(([channel, version]) => blobOf(ns, channel, version) !== undefined);
}

// ---------------------------------------------------------------------------------------------
// Queries over the read model (pure; the saver deserializes what they return).
// ---------------------------------------------------------------------------------------------

/** Namespaces of the thread in order of first appearance. */
export function namespacesOf(state: ThreadCheckpoints): string[] {
  return pmapKeys(state.namespaces);
}

export function namespaceOf(state: ThreadCheckpoints, ns: string): NamespaceCheckpoints | undefined {
  return pmapGet(state.namespaces, ns);
}

export function checkpointOf(ns: NamespaceCheckpoints, checkpointId: string): CheckpointEntry | undefined {
  return pmapGet(ns.checkpoints, checkpointId);
}

export function latestCheckpointOf(ns: NamespaceCheckpoints): CheckpointEntry | undefined {
  return ns.latest === "" ? undefined : pmapGet(ns.checkpoints, ns.latest);
}

/** Checkpoints of one namespace, newest (greatest id) first, as MemorySaver orders them. */
export function checkpointsNewestFirst(ns: NamespaceCheckpoints): CheckpointEntry[] {
  return pmapKeys(ns.checkpoints)
    .sort()
    .reverse()
    .map((id) => pmapGet(ns.checkpoints, id) as CheckpointEntry);
}

/**
 * The stored value of `channel` at `version`: a serialized value, null when the channel was empty
 * at that version, undefined when no put stored it.
 */
export function blobOf(ns: NamespaceCheckpoints, channel: string, version: number | string): SerializedValue | null | undefined {
  return pmapGet(ns.blobs, blobKey(channel, version));
}

/** Pending writes of a checkpoint in `writesSortKey` order (task_path, task_id, idx). */
export function pendingWritesOf(ns: NamespaceCheckpoints, checkpointId: string): WriteEntry[] {
  const forCheckpoint = pmapGet(ns.writes, checkpointId);
  if (!forCheckpoint) return [];
  return pmapEntries(forCheckpoint)
    .map(([, w]) => w)
    .sort((a, b) => compareWritesSortKeys(writesSortKey(a.task_path, a.task_id, a.idx), writesSortKey(b.task_path, b.task_id, b.idx)));
}

/** Every blob of a namespace, `[channel, version, value]`, in order of first write. */
export function blobsOf(ns: NamespaceCheckpoints): [channel: string, version: number | string, value: SerializedValue | null][] {
  return pmapEntries(ns.blobs).map(([key, value]) => {
    const [channel, version] = JSON.parse(key) as [string, number | string];
    return [channel, version, value];
  });
}

/** A plain, journal-free picture of a thread's read model: for comparisons and debugging. */
export function describeThread(state: ThreadCheckpoints | undefined): unknown {
  if (!state) return undefined;
  return {
    thread_id: state.thread_id,
    copied_from: state.copied_from,
    namespaces: namespacesOf(state).map((name) => {
      const ns = namespaceOf(state, name) as NamespaceCheckpoints;
      return {
        checkpoint_ns: name,
        latest: ns.latest,
        checkpoints: checkpointsNewestFirst(ns),
        blobs: blobsOf(ns),
        writes: pmapKeys(ns.writes).map((id) => [id, pendingWritesOf(ns, id)]),
      };
    }),
  };
}
