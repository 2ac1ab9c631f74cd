import type { RunnableConfig } from "@langchain/core/runnables";
import {
  BaseCheckpointSaver,
  TASKS,
  getCheckpointId,
  type ChannelVersions,
  type Checkpoint,
  type CheckpointListOptions,
  type CheckpointMetadata,
  type CheckpointTuple,
  type PendingWrite,
  type SerializerProtocol,
} from "@langchain/langgraph-checkpoint";
import { randomUUID } from "node:crypto";
import {
  CHECKPOINT_SNAPSHOT_STREAM_PREFIX,
  CHECKPOINT_STREAM_PREFIX,
  CHECKPOINT_VALUE_STREAM_PREFIX,
  checkpointStream,
  checkpointValueKey,
  isOwnCheckpointValueStream,
  threadIdOfCheckpointStream,
  inFormOf,
  type ChannelBlob,
  type CheckpointSaved,
  type CheckpointsCopied,
  type CheckpointsDeleted,
  type CheckpointsDiscarded,
  type CheckpointsSnapshot,
  type PendingWritesSaved,
  type SerializedValue,
  type CheckpointEvent,
  TTL_KEEP_LATEST_REASON,
} from "../domain/checkpoint-events.js";
import type { AppendTicket, EventData, EventStore, RecordedEvent } from "../eventstore/types.js";
import { CommandPipeline } from "../commands/pipeline.js";
import {
  APPEND_BUDGET,
  appendInBatches,
  getLargeJson,
  operationEventId,
  putLargeJson,
  putLargeJsonText,
  sha256Hex,
  sizeOfEvent,
} from "../eventstore/chunked-append.js";
import {
  answerable,
  blobOf,
  checkpointOf,
  checkpointsNewestFirst,
  latestCheckpointOf,
  namespaceOf,
  namespacesOf,
  pendingWritesOf,
  pmapKeys,
  snapshotOf,
  evolveCheckpoints,
  type CheckpointEntry,
  type NamespaceCheckpoints,
  type ThreadCheckpoints,
  type WriteEntry,
} from "../../projections/checkpoints.js";
import { ThreadCheckpointsCache, type RevisionedEvent } from "./checkpoint-cache.js";
import { DeferredAppends } from "./deferred-appends.js";
import { ValueTexts } from "./value-texts.js";
import { jsonContains } from "../domain/json.js";
import { CheckpointCodec, defersWrites, type EncodedTuple, type InlineValue } from "./checkpoint-codec.js";
import { tracePoint } from "../util/trace-points.js";
import { isEvent } from "../domain/event-of.js";
import { publicMetadata } from "./stream-modes.js";

export { DEFER_CHECKPOINT_WRITES, checkpointMetadata } from "./checkpoint-codec.js";

/** Threads whose folded checkpoints are kept when the caller does not say (CHECKPOINT_CACHE_THREADS). */
export const DEFAULT_CHECKPOINT_CACHE_THREADS = 1000;
/** Bytes of folded checkpoints kept when the caller does not say (CHECKPOINT_CACHE_BYTES). */
export const DEFAULT_CHECKPOINT_CACHE_BYTES = 32 * 1024 * 1024;
/** A snapshot is written after this many checkpoints of a thread (see ThreadCheckpointsCache). */
export const DEFAULT_SNAPSHOT_EVERY = 100;
/**
 * A serialized value (its text or base64) above this many characters is kept in its own stream
 * (`checkpoint-value-{sha256}`, the hash of its JSON text, as its ref holds it; values stored in the
 * older base64 form name the hash of the base64 itself: either way the ref names the stream) and the event holds its ref: events stay under EventStoreDB's
 * append limit, and the cache holds refs, not megabytes.
 */
export const LARGE_CHECKPOINT_VALUE_BYTES = 128 * 1024;
/** Characters of large values' texts kept by hash (see ValueTexts): a few long conversations' latest state. */
const VALUE_TEXTS_CHARS = 8 * 1024 * 1024;

export interface EventSourcedCheckpointSaverOptions {
  store: EventStore;
  serde?: SerializerProtocol;
  /** Threads whose folded checkpoints stay in memory (least recently used dropped first). */
  cacheThreads?: number;
  /** Bytes (serialized size) the held threads may take together. */
  cacheBytes?: number;
  /** Checkpoints of a thread between two snapshots (a miss reads back to the latest one). */
  snapshotEvery?: number;
  /**
   * A live feed of `checkpoints-` events (LiveFeed, with a shared store) whose events keep held threads up
   * to date with appends by other processes (EventStoreDB). Without it, only this process's own
   * appends and fresh reads (copy, rollback, the claim's base checkpoint) see them.
   */
  live?: { onApplied(listener: (event: RecordedEvent) => void): () => void };
  /**
   * Record the run's configurable values and config metadata in each checkpoint's metadata, as
   * the official server's saver does (see checkpointMetadata). The server sets it; off, metadata
   * is stored as given (the plain BaseCheckpointSaver contract the validation suite checks).
   */
  metadataFromConfig?: boolean;
}

/**
 * LangGraph checkpointer on the event log. Writes append to `checkpoints-{thread_id}` and return
 * once the thread's cached state includes them (read-your-writes); reads fold the thread's own
 * stream on demand and keep the most recently used threads (see ThreadCheckpointsCache).
 * Every `snapshotEvery` checkpoints a CheckpointsSnapshot is appended, so a cache miss reads only
 * the tail of the stream; reads such a state cannot answer (history, old checkpoints) read the
 * whole stream, uncached. Events stay under EventStoreDB's 1 MiB append limit: large values live
 * in their own streams (`fit`), and a copy is written in several idempotent appends.
 * Like the Postgres saver, a put stores only the channels listed in `newVersions` (as blobs keyed
 * by channel and version) and reads rebuild `channel_values` from the blobs that match the
 * checkpoint's `channel_versions`.
 */
export class EventSourcedCheckpointSaver extends BaseCheckpointSaver {
  private readonly store: EventStore;
  private readonly commands: CommandPipeline;
  /** Exposed for tests and diagnostics (how many threads are held). */
  readonly cache: ThreadCheckpointsCache;
  private readonly unsubscribe: (() => void) | undefined;
  private readonly snapshotEvery: number;
  /** LangGraph's objects ↔ event data (the serializer's work). */
  private readonly codec: CheckpointCodec;
  /** Appends of runs that did not wait for them (see DEFER_CHECKPOINT_WRITES), by thread. */
  private readonly deferred = new DeferredAppends();
  /** Large values written or read lately, by hash: the next run of the thread reads them back at once. */
  private readonly valueTexts = new ValueTexts(VALUE_TEXTS_CHARS);
  /**
   * Whether appends commit in the order they are called (SQLite's single in-process queue). Over the
   * network (EventStoreDB) two appends in flight may commit in either order: a deferred write then
   * starts only once the thread's previous one is done.
   */
  private readonly appendsCommitInCallOrder: boolean;

  constructor(options: EventSourcedCheckpointSaverOptions) {
    super(options.serde);
    this.store = options.store;
    this.commands = new CommandPipeline(options.store);
    this.appendsCommitInCallOrder = options.store.kind === "sqlite";
    this.codec = new CheckpointCodec(this.serde, options.metadataFromConfig ?? false);
    this.snapshotEvery = options.snapshotEvery ?? DEFAULT_SNAPSHOT_EVERY;
    this.cache = new ThreadCheckpointsCache({
      store: options.store,
      maxThreads: options.cacheThreads ?? DEFAULT_CHECKPOINT_CACHE_THREADS,
      maxBytes: options.cacheBytes ?? DEFAULT_CHECKPOINT_CACHE_BYTES,
    });
    const cache = this.cache;
    this.unsubscribe = options.live?.onApplied((event) => {
      if (event.streamId.startsWith(CHECKPOINT_STREAM_PREFIX)) cache.observed(event);
    });
  }

  /** Stops following the live subscription. */
  close(): void {
    this.unsubscribe?.();
  }

  async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const threadId = config.configurable?.thread_id;
    if (threadId === undefined || threadId === null) return undefined;
    await this.deferred.drain(String(threadId));
    let thread = await this.cache.get(String(threadId));
    const checkpointNs: string = config.configurable?.checkpoint_ns ?? "";
    const checkpointId = getCheckpointId(config);
    // A state folded from a snapshot lacks old checkpoints: read the history for those.
    if (!answerable(thread, checkpointNs, checkpointId || undefined)) thread = (await this.cache.full(String(threadId))).state;
    const ns = thread && namespaceOf(thread, checkpointNs);
    if (!thread || !ns) return undefined;
    const entry = checkpointId ? checkpointOf(ns, checkpointId) : latestCheckpointOf(ns);
    return entry && this.decode(await this.encodedTupleOf(thread.thread_id, checkpointNs, ns, entry));
  }

  async *list(config: RunnableConfig, options?: CheckpointListOptions): AsyncGenerator<CheckpointTuple> {
    const { before, filter } = options ?? {};
    let limit = options?.limit;
    const threadId = config.configurable?.thread_id;
    const onlyNs: string | undefined = config.configurable?.checkpoint_ns;
    const onlyId: string | undefined = config.configurable?.checkpoint_id;
    const beforeId: string | undefined = before?.configurable?.checkpoint_id;
    if (threadId !== undefined && threadId !== null) await this.deferred.drain(String(threadId));
    // Read models are persistent values: holding them across the awaits below is safe.
    const threads = threadId !== undefined && threadId !== null ? this.oneThread(String(threadId)) : this.everyThread();
    for await (const thread of threads) {
      for (const nsName of namespacesOf(thread)) {
        if (onlyNs !== undefined && nsName !== onlyNs) continue;
        const ns = namespaceOf(thread, nsName) as NamespaceCheckpoints;
        for (const entry of checkpointsNewestFirst(ns)) {
          if (onlyId && entry.checkpoint_id !== onlyId) continue;
          if (beforeId && entry.checkpoint_id >= beforeId) continue;
          if (filter && !matchesMetadata(entry.metadata, filter)) continue;
          if (limit !== undefined) {
            if (limit <= 0) return;
            limit -= 1;
          }
          yield await this.decode(await this.encodedTupleOf(thread.thread_id, nsName, ns, entry));
        }
      }
    }
  }

  async put(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, newVersions: ChannelVersions): Promise<RunnableConfig> {
    tracePoint("checkpoint.put");
    // Internal keys (`__…`) never reach stored metadata: some LangGraph versions copy the run's whole
    // `configurable` (the server's and the pregel loop's own keys among it) into the metadata.
    const cleanConfig = config.metadata === undefined ? config : { ...config, metadata: publicMetadata(config.metadata) };
    const data = await this.codec.checkpointSaved(cleanConfig, checkpoint, publicMetadata(metadata), newVersions);
    const threadId = data.thread_id;
    const fitting = this.fit(threadId, data.blobs);
    if (fitting) await fitting;
    const writing = this.write(config, threadId, (ticket) =>
      this.append(threadId, [{ type: "CheckpointSaved", data }], undefined, ticket).then(() => {
        if (!this.snapshotDue(threadId)) return;
        // A snapshot only shortens later reads: one the log refuses leaves the checkpoint, written, as it is
        // (and must not fail a run that ended meanwhile, nor the thread's next one).
        return this.maybeSnapshot(threadId).catch((error: unknown) =>
          console.error(`checkpoints of thread ${threadId}: snapshot not written: ${(error as Error).message}`),
        );
      }),
    );
    if (writing) await writing;
    return { configurable: { thread_id: threadId, checkpoint_ns: data.checkpoint_ns, checkpoint_id: data.checkpoint_id } };
  }

  async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath?: string): Promise<void> {
    tracePoint("checkpoint.putWrites");
    const data = await this.codec.pendingWritesSaved(config, writes, taskId, taskPath);
    const threadId = data.thread_id;
    // A retry of writes already stored would change nothing (the fold keeps the first regular
    // write per (task, idx)); skip the append. The fold stays the authority under races.
    const hit = this.cache.cached(threadId);
    const thread = hit ? hit.state : await this.cache.get(threadId);
    const ns = thread && namespaceOf(thread, data.checkpoint_ns);
    if (ns && data.writes.length > 0) {
      const stored = new Set(pendingWritesOf(ns, data.checkpoint_id).map((w) => `${w.task_id}\u0000${w.idx}`));
      if (data.writes.every((w) => w.idx >= 0 && stored.has(`${data.task_id}\u0000${w.idx}`))) return;
    }
    const fitting = this.fit(threadId, data.writes, data);
    if (fitting) await fitting;
    const writing = this.write(config, threadId, (ticket) => this.append(threadId, [{ type: "PendingWritesSaved", data }], undefined, ticket));
    if (writing) await writing;
  }

  /**
   * Runs `append` (whose first step must call the store's append, synchronously, with the ticket)
   * and returns its promise, or, for a run that defers its writes, tracks it and returns nothing.
   */
  private write(config: RunnableConfig, threadId: string, append: (ticket: AppendTicket | undefined) => Promise<unknown>): Promise<unknown> | undefined {
    if (!defersWrites(config)) return append(undefined);
    this.deferred.add(threadId, append, !this.appendsCommitInCallOrder);
    return undefined;
  }

  /**
   * Waits for the thread's deferred writes (see DEFER_CHECKPOINT_WRITES) and throws the first that
   * failed: a run calls it before it ends, so that its end never claims checkpoints the log refused.
   */
  async flush(threadId: string): Promise<void> {
    await this.deferred.flush(threadId);
  }

  /**
   * Without waiting: the tickets of the thread's deferred checkpoint appends still in flight, for a
   * run's end to depend on (AppendOptions.after), so that it is written with them (one commit)
   * and never without them. Throws the first deferred write that already failed, as flush does.
   */
  writesInFlight(threadId: string): AppendTicket[] {
    return this.deferred.tickets(threadId);
  }

  async deleteThread(threadId: string): Promise<void> {
    await this.deferred.drain(threadId);
    const data: CheckpointsDeleted = { thread_id: threadId };
    await this.append(threadId, [{ type: "CheckpointsDeleted", data }]);
  }

  /**
   * The checkpoint TTL's `keep_latest` claim: discards all but the latest checkpoint of each
   * namespace if the thread's stream is still at `expected`, in one CheckpointsDiscarded (which may
   * list none: it marks the sweep either way). Undefined when the stream is elsewhere (another
   * process swept it, or the thread was written to); else how many checkpoints were discarded, and
   * where the discard is in the log.
   */
  async keepLatestAt(threadId: string, expected: bigint | "no_stream"): Promise<{ discarded: number; position: bigint } | undefined> {
    await this.deferred.drain(threadId);
    let thread: ThreadCheckpoints | undefined;
    if (expected !== "no_stream") {
      const full = await this.cache.full(threadId);
      if (full.revision !== expected) return undefined;
      thread = full.state;
    }
    const checkpoints: CheckpointsDiscarded["checkpoints"] = [];
    for (const nsName of thread ? namespacesOf(thread) : []) {
      const ns = namespaceOf(thread!, nsName) as NamespaceCheckpoints;
      for (const entry of [...checkpointsNewestFirst(ns)].slice(1)) checkpoints.push({ checkpoint_ns: nsName, checkpoint_id: entry.checkpoint_id });
    }
    const data: CheckpointsDiscarded = { thread_id: threadId, checkpoints, reason: TTL_KEEP_LATEST_REASON };
    const events = [{ type: "CheckpointsDiscarded", data }];
    const result = await this.commands.append({ stream: checkpointStream(threadId), events, expected, onConflict: "lose" });
    if (!result) return undefined;
    const caching = this.cache.appended(threadId, revisioned(events, result.nextExpectedRevision, result.dataLengths));
    if (caching) await caching;
    // A cached state folded from an older snapshot may no longer know the latest: snapshot now.
    if (thread && checkpoints.length > 0) {
      const after = evolveCheckpoints(thread, { type: "CheckpointsDiscarded", data }, threadId);
      await this.writeSnapshot(threadId, after, result.nextExpectedRevision);
    }
    return { discarded: checkpoints.length, position: result.position };
  }

  /**
   * Discards every checkpoint (all namespaces) newer than `afterCheckpointId` (all of them when
   * null): the thread is rolled back to where it was at that checkpoint (double-texting
   * `rollback` discards what the cancelled run wrote). Checkpoint ids are time-ordered. One append.
   */
  async discardAfter(threadId: string, afterCheckpointId: string | null, reason?: string): Promise<number> {
    return this.discard(
      threadId,
      (newestFirst) => {
        const cut = newestFirst.findIndex((id) => afterCheckpointId !== null && id <= afterCheckpointId);
        return cut < 0 ? newestFirst : newestFirst.slice(0, cut);
      },
      reason,
    );
  }

  /**
   * Discards all but the latest checkpoint of each namespace (`POST /threads/prune`, strategy
   * `keep_latest`): the thread keeps its state, its history before it goes. One append.
   */
  async discardAllButLatest(threadId: string, reason?: string): Promise<number> {
    return this.discard(threadId, (newestFirst) => newestFirst.slice(1), reason);
  }

  /** Discards, per namespace, the checkpoints `choose` picks from its ids (newest first). */
  private async discard(threadId: string, choose: (newestFirst: string[]) => string[], reason?: string): Promise<number> {
    // The whole stream (what another process's run on this thread wrote must be discarded too, and
    // a state folded from a snapshot does not hold the older checkpoints). The append expects the
    // revision read: if the stream moved on meanwhile, read again.
    await this.deferred.drain(threadId);
    for (;;) {
      const { state: thread, revision } = await this.cache.full(threadId);
      if (!thread) return 0;
      const checkpoints: CheckpointsDiscarded["checkpoints"] = [];
      for (const nsName of namespacesOf(thread)) {
        const ns = namespaceOf(thread, nsName) as NamespaceCheckpoints;
        const ids = [...checkpointsNewestFirst(ns)].map((entry) => entry.checkpoint_id);
        for (const id of choose(ids)) checkpoints.push({ checkpoint_ns: nsName, checkpoint_id: id });
      }
      if (checkpoints.length === 0) return 0;
      const data: CheckpointsDiscarded = { thread_id: threadId, checkpoints };
      if (reason) data.reason = reason;
      const last = await this.append(threadId, [{ type: "CheckpointsDiscarded", data }], revision);
      if (last === undefined) continue;
      // A cached state folded from an older snapshot may no longer know the latest: snapshot now.
      const after = evolveCheckpoints(thread, { type: "CheckpointsDiscarded", data }, threadId);
      await this.writeSnapshot(threadId, after, last);
      return checkpoints.length;
    }
  }

  /**
   * Id of the thread's latest root checkpoint, including what other processes appended (null when
   * it has none); the base a rollback returns to, so it must not be stale.
   */
  async latestCheckpointId(threadId: string): Promise<string | null> {
    await this.deferred.drain(threadId);
    let thread = await this.cache.fresh(threadId);
    if (!answerable(thread, "")) thread = (await this.cache.full(threadId)).state;
    const ns = thread && namespaceOf(thread, "");
    return (ns && latestCheckpointOf(ns)?.checkpoint_id) ?? null;
  }

  /**
   * Replaces the checkpoints of `toThreadId` with a copy of those of `fromThreadId` (same
   * checkpoint ids, namespaces, blobs and pending writes; a `thread_id` in metadata is rewritten).
   * Appended to the target stream: CheckpointsCopied, then per namespace and in id order one
   * CheckpointSaved per checkpoint followed by its PendingWritesSaved (one per task), then a
   * snapshot. A copy can be far over one append's limit, so it is written in several appends
   * (`appendInBatches`): not atomic, but idempotent and resumable. Its event ids derive from an
   * operation id recorded in the CheckpointsCopied event; a retry after a crash finds that
   * unfinished copy at the end of the target stream and writes only what is missing.
   */
  async copyThread(fromThreadId: string, toThreadId: string): Promise<void> {
    if (fromThreadId === toThreadId) throw new Error("copyThread: source and target thread are the same");
    await Promise.all([this.deferred.drain(fromThreadId), this.deferred.drain(toThreadId)]);
    // The whole source, including what other processes appended before we were asked.
    const source = await this.cache.full(fromThreadId);
    const copied = source.state ? await this.ownValues(copyEvents(source.state, toThreadId), fromThreadId, toThreadId) : [];
    const sourceRevision = String(source.revision);
    const unfinished = await this.unfinishedCopy(fromThreadId, toThreadId, sourceRevision, copied.length);
    if (unfinished?.done) return;
    const operationId = unfinished?.operationId ?? randomUUID();
    const marker: CheckpointsCopied = {
      thread_id: toThreadId,
      from_thread_id: fromThreadId,
      checkpoints: copied.filter((e) => e.type === "CheckpointSaved").length,
      operation_id: operationId,
      source_revision: sourceRevision,
      events: copied.length,
    };
    const events: EventData[] = [{ type: "CheckpointsCopied", data: marker }, ...copied];
    const stream = checkpointStream(toThreadId);
    let last = await appendInBatches(this.store, stream, events, {
      operationId,
      skip: unfinished?.written ?? 0,
      onAppended: (batch, lastRevision) => this.cache.appended(toThreadId, revisioned(batch, lastRevision)),
    });
    if (last < 0n) last = (await this.store.readStream(stream, { direction: "backwards", maxCount: 1 }))[0]?.revision ?? -1n;
    // The copy's fold, so that a miss on the target reads the snapshot, not every copied checkpoint.
    let state: ThreadCheckpoints | undefined;
    for (const e of events) state = evolveCheckpoints(state, e as CheckpointEvent, toThreadId);
    await this.writeSnapshot(toThreadId, state, last);
  }

  /**
   * An earlier copy of the same source revision onto the target that the stream ends with: the
   * target's last events are its CheckpointsCopied and some of its events, in order (ids tell).
   * Reads at most the copy's length from the end of the target stream.
   */
  private async unfinishedCopy(
    fromThreadId: string,
    toThreadId: string,
    sourceRevision: string,
    copiedEvents: number,
  ): Promise<{ operationId: string; written: number; done: boolean } | undefined> {
    const tail = await this.store.readStream(checkpointStream(toThreadId), { direction: "backwards", maxCount: copiedEvents + 2 });
    const at = tail.findIndex((e) => e.type === "CheckpointsCopied");
    const copy = tail[at];
    if (at < 0 || !isEvent(copy, "CheckpointsCopied")) return undefined;
    const marker = copy.data;
    const operationId = marker.operation_id;
    if (!operationId || marker.from_thread_id !== fromThreadId || marker.source_revision !== sourceRevision) return undefined;
    const ours = tail.slice(0, at + 1).reverse(); // the marker and what follows it, oldest first
    const written = ours.findIndex((e, i) => e.id !== operationEventId(operationId, i));
    if (written >= 0) {
      // Something else follows the copy: done if the copy itself is whole (then this is a new copy).
      return written === copiedEvents + 1 && ours[written].type === "CheckpointsSnapshot" ? { operationId, written, done: true } : undefined;
    }
    return { operationId, written: ours.length, done: ours.length === copiedEvents + 1 };
  }

  private async *oneThread(threadId: string): AsyncGenerator<ThreadCheckpoints> {
    let thread = await this.cache.get(threadId);
    // History: a state folded from a snapshot holds only the latest checkpoints.
    if (thread?.partial) thread = (await this.cache.full(threadId)).state;
    if (thread) yield thread;
  }

  /**
   * Every thread with checkpoints, in order of first appearance in the log. Only `list()` without
   * a thread_id needs it (tools and the validation suite, no route): it scans `$all` for the
   * thread ids, then folds one thread at a time without making them resident.
   */
  private async *everyThread(): AsyncGenerator<ThreadCheckpoints> {
    const ids = new Set<string>();
    const pageSize = 1000;
    let from: bigint | "start" = "start";
    let seen = -1n;
    for (;;) {
      const page = await this.store.readAll({ fromPosition: from, maxCount: pageSize, filter: { streamPrefixes: [CHECKPOINT_STREAM_PREFIX] } });
      for (const event of page) {
        if (event.position <= seen) continue;
        ids.add(threadIdOfCheckpointStream(event.streamId) as string);
        seen = event.position;
      }
      if (page.length < pageSize) break;
      // Inclusive start at the last event seen (skipped above): an ESDB position + 1 is no position.
      from = seen;
    }
    for (const id of ids) {
      const thread = await this.cache.peek(id);
      if (thread) yield thread;
    }
  }

  /**
   * Appends to the thread's stream and waits until the cache has it. With `expected`, returns
   * undefined instead of appending when the stream moved on (the caller's view is outdated).
   */
  private async append(threadId: string, events: EventData[], expected?: bigint, ticket?: AppendTicket): Promise<bigint | undefined> {
    // With an expected revision, a conflict means the caller's view is outdated: nothing is appended.
    const result = await this.commands.append({ stream: checkpointStream(threadId), events, expected: expected ?? "any", ticket, onConflict: "lose" });
    if (!result) return undefined;
    const caching = this.cache.appended(threadId, revisioned(events, result.nextExpectedRevision, result.dataLengths));
    if (caching) await caching;
    return result.nextExpectedRevision;
  }

  /** Whether enough checkpoints were folded since the thread's last snapshot for another. */
  private snapshotDue(threadId: string): boolean {
    const held = this.cache.held(threadId);
    return held !== undefined && held.sinceSnapshot >= this.snapshotEvery;
  }

  /** Snapshots the thread once enough checkpoints were folded since the last snapshot. */
  private async maybeSnapshot(threadId: string): Promise<void> {
    if (!this.snapshotDue(threadId)) return;
    const held = this.cache.held(threadId)!;
    await this.writeSnapshot(threadId, held.state, held.revision);
  }

  /**
   * Appends a CheckpointsSnapshot of `state`, which must be the fold up to `revision`: its content
   * first (own stream, any size), then the marker with that expected revision, so a marker never
   * sits after events its content lacks (a concurrent append wins; the next put tries again).
   */
  private async writeSnapshot(threadId: string, state: ThreadCheckpoints | undefined, revision: bigint): Promise<void> {
    let content = snapshotOf(state);
    if (!content) {
      const full = await this.cache.full(threadId);
      if (full.revision !== revision) return;
      content = snapshotOf(full.state);
    }
    if (!content || content.namespaces.length === 0) return;
    const ref = await putLargeJson(this.store, CHECKPOINT_SNAPSHOT_STREAM_PREFIX, `${threadId}-${revision}`, content);
    const data: CheckpointsSnapshot = { thread_id: threadId, ref, checkpoints: this.cache.held(threadId)?.sinceSnapshot ?? 0 };
    await this.append(threadId, [{ type: "CheckpointsSnapshot", data }], revision);
  }

  /**
   * Keeps an event under the append limit: values above LARGE_CHECKPOINT_VALUE_BYTES, then the largest
   * others until the event fits, move to the thread's own streams (content-addressed within the
   * thread, so a retried put shares them) and the event keeps their refs. Mutates the given slots.
   */
  private fit(threadId: string, slots: { value: SerializedValue | null }[], event?: unknown): Promise<void> | undefined {
    const inline = slots.filter((s): s is { value: InlineValue } => s.value !== null && typeof s.value[1] === "string");
    // Small values (the usual case): the event fits without measuring it (what is not a value is small),
    // and nothing is awaited.
    let total = 0;
    for (const slot of inline) {
      if (slot.value[1].length > LARGE_CHECKPOINT_VALUE_BYTES) total = Infinity;
      total += slot.value[1].length;
    }
    if (total <= APPEND_BUDGET / 2) return undefined;
    return this.moveLargeValues(threadId, slots, inline, event);
  }

  /** fit's slow path: moves values to their own streams, largest first, until the event fits. */
  private async moveLargeValues(
    threadId: string,
    slots: { value: SerializedValue | null }[],
    inline: { value: InlineValue }[],
    event?: unknown,
  ): Promise<void> {
    inline.sort((a, b) => b.value[1].length - a.value[1].length);
    const whole = () => sizeOfEvent({ type: "CheckpointSaved", data: event ?? { blobs: slots } });
    for (const slot of inline) {
      if (slot.value[1].length <= LARGE_CHECKPOINT_VALUE_BYTES && whole() <= APPEND_BUDGET) break;
      const payload = slot.value[1];
      // Content-addressed by the hash of the JSON text it is stored as (which its ref holds): one hash per value.
      const text = JSON.stringify(payload);
      const sha256 = sha256Hex(text);
      const ref = await putLargeJsonText(this.store, CHECKPOINT_VALUE_STREAM_PREFIX, checkpointValueKey(threadId, sha256), text, sha256);
      (slot as { value: SerializedValue }).value = inFormOf(slot.value, ref);
      this.valueTexts.set(sha256, payload);
    }
  }

  /**
   * The copy's events with the source's own large values written again as the copy's (the same text,
   * so the same hash and chunk ids: a resumed copy writes nothing twice), so that a purge of either
   * thread leaves the other's values. Older shared value streams stay shared.
   */
  private async ownValues(events: EventData[], fromThreadId: string, toThreadId: string): Promise<EventData[]> {
    const own = async <S extends { value: SerializedValue | null }>(slot: S): Promise<S> => {
      const stored = slot.value?.[1];
      if (!slot.value || typeof stored !== "object" || !isOwnCheckpointValueStream(stored.stream, fromThreadId)) return slot;
      const text = JSON.stringify((await this.inline(slot.value))[1]);
      const ref = await putLargeJsonText(this.store, CHECKPOINT_VALUE_STREAM_PREFIX, checkpointValueKey(toThreadId, stored.sha256), text, stored.sha256);
      return { ...slot, value: inFormOf(slot.value, ref) };
    };
    const out: EventData[] = [];
    for (const event of events) {
      if (isEvent(event, "CheckpointSaved")) out.push({ ...event, data: { ...event.data, blobs: await Promise.all(event.data.blobs.map(own)) } });
      else if (isEvent(event, "PendingWritesSaved")) out.push({ ...event, data: { ...event.data, writes: await Promise.all(event.data.writes.map(own)) } });
      else out.push(event);
    }
    return out;
  }

  /** A stored checkpoint with its values read back (large ones from their streams), still serialized. */
  private async encodedTupleOf(threadId: string, checkpointNs: string, ns: NamespaceCheckpoints, entry: CheckpointEntry): Promise<EncodedTuple> {
    const values: EncodedTuple["values"] = [];
    for (const [channel, version] of Object.entries(entry.checkpoint.channel_versions ?? {})) {
      const blob = blobOf(ns, channel, version);
      if (blob) values.push([channel, await this.inline(blob)]);
    }
    const parentId = entry.parent_checkpoint_id;
    const encoded: EncodedTuple = {
      threadId,
      checkpointNs,
      checkpointId: entry.checkpoint_id,
      parentId,
      checkpoint: entry.checkpoint,
      metadata: publicMetadata(entry.metadata),
      values,
      pendingWrites: await Promise.all(
        pendingWritesOf(ns, entry.checkpoint_id).map(async (w) => [w.task_id, w.channel, await this.inline(w.value)] as [string, string, InlineValue]),
      ),
    };
    if (entry.checkpoint.v < 4 && parentId !== null) {
      encoded.pendingSends = await Promise.all(
        pendingWritesOf(ns, parentId)
          .filter((w) => w.channel === TASKS)
          .map((w) => this.inline(w.value)),
      );
    }
    return encoded;
  }

  private decode(encoded: EncodedTuple): Promise<CheckpointTuple> {
    return this.codec.tuple(encoded, () => this.getNextVersion(undefined));
  }

  /** A serialized value with its bytes: a large one is read from its own stream. */
  private async inline(value: SerializedValue): Promise<InlineValue> {
    const stored = value[1];
    if (typeof stored === "string") return inFormOf(value, stored);
    let text = this.valueTexts.get(stored.sha256);
    if (text === undefined) {
      text = (await getLargeJson(this.store, stored)) as string;
      this.valueTexts.set(stored.sha256, text);
    }
    return inFormOf(value, text);
  }
}

/** Events of one acknowledged append with their revisions (the last one is `lastRevision`). */
function revisioned(events: EventData[], lastRevision: bigint, dataLengths?: readonly number[]): RevisionedEvent[] {
  const first = lastRevision - BigInt(events.length) + 1n;
  const lengths = dataLengths?.length === events.length ? dataLengths : undefined;
  return events.map((e, i) => ({ revision: first + BigInt(i), type: e.type, data: e.data, dataLength: lengths?.[i] }));
}

/** PostgreSQL `@>` containment of the filter in the metadata, as the official servers filter it. */
const matchesMetadata = (metadata: Record<string, unknown>, filter: Record<string, unknown>): boolean => jsonContains(metadata, filter);

/** The events that rebuild `source`'s checkpoints on another thread (see `copyThread`). */
function copyEvents(source: ThreadCheckpoints, toThreadId: string): EventData[] {
  const events: EventData[] = [];
  for (const nsName of namespacesOf(source)) {
    const ns = namespaceOf(source, nsName) as NamespaceCheckpoints;
    const emitted = new Set<string>();
    const oldestFirst = checkpointsNewestFirst(ns).reverse();
    const copiedIds = new Set<string>();
    for (const entry of oldestFirst) {
      const blobs: ChannelBlob[] = [];
      for (const [channel, version] of Object.entries(entry.checkpoint.channel_versions)) {
        const key = JSON.stringify([channel, version]);
        const value = blobOf(ns, channel, version);
        if (value === undefined || emitted.has(key)) continue;
        emitted.add(key);
        blobs.push({ channel, version, value });
      }
      const metadata = typeof entry.metadata.thread_id === "string" ? { ...entry.metadata, thread_id: toThreadId } : entry.metadata;
      const saved: CheckpointSaved = {
        thread_id: toThreadId,
        checkpoint_ns: nsName,
        checkpoint_id: entry.checkpoint_id,
        parent_checkpoint_id: entry.parent_checkpoint_id,
        checkpoint: entry.checkpoint,
        metadata,
        blobs,
      };
      events.push({ type: "CheckpointSaved", data: saved });
      events.push(...writeEvents(toThreadId, nsName, entry.checkpoint_id, pendingWritesOf(ns, entry.checkpoint_id)));
      copiedIds.add(entry.checkpoint_id);
    }
    // Writes recorded against checkpoints that were never saved (kept by every saver, so copied too).
    for (const checkpointId of pmapKeys(ns.writes)) {
      if (!copiedIds.has(checkpointId)) {
        events.push(...writeEvents(toThreadId, nsName, checkpointId, pendingWritesOf(ns, checkpointId)));
      }
    }
  }
  return events;
}

function writeEvents(threadId: string, checkpointNs: string, checkpointId: string, writes: WriteEntry[]): EventData[] {
  const byTask = new Map<string, PendingWritesSaved>();
  for (const w of writes) {
    const key = JSON.stringify([w.task_id, w.task_path]);
    let data = byTask.get(key);
    if (!data) {
      data = {
        thread_id: threadId,
        checkpoint_ns: checkpointNs,
        checkpoint_id: checkpointId,
        task_id: w.task_id,
        task_path: w.task_path,
        writes: [],
      };
      byTask.set(key, data);
    }
    data.writes.push({ idx: w.idx, channel: w.channel, value: w.value });
  }
  return [...byTask.values()].map((data) => ({ type: "PendingWritesSaved", data }));
}
