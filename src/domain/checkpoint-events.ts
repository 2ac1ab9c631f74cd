import * as z from "zod";
import type { ZodType } from "zod";
import { largeJsonEventSchemas, largeJsonRefSchema } from "../eventstore/chunked-append.js";
import { JsonObjectSchema } from "../util/json.js";

/**
 * The LangGraph checkpointer's event catalogue. One stream per thread, `checkpoints-{thread_id}`;
 * every checkpoint namespace of the thread (root "" and subgraphs) lives in that stream.
 *
 * Values that only LangGraph's serializer understands (channel values, pending-write values) are
 * stored as `[type, text, "utf8"]` (the bytes of `serde.dumpsTyped` are UTF-8, as its JSON always is:
 * readable in the log) or else as `[type, base64]`. Checkpoints (without
 * their channel values) and metadata are stored as the JSON that `serde.dumpsTyped` produced, so
 * they stay readable to other projections and round-trip exactly through `serde.loadsTyped("json")`.
 */

export const CHECKPOINT_STREAM_PREFIX = "checkpoints-";

export function checkpointStream(threadId: string): string {
  return `${CHECKPOINT_STREAM_PREFIX}${threadId}`;
}

/** The thread id of a `checkpoints-{thread_id}` stream, or undefined for other streams. */
export function threadIdOfCheckpointStream(streamId: string): string | undefined {
  return streamId.startsWith(CHECKPOINT_STREAM_PREFIX) ? streamId.slice(CHECKPOINT_STREAM_PREFIX.length) : undefined;
}

/**
 * A value serialized with `serde.dumpsTyped`: `[type, text, "utf8"]` when its bytes are UTF-8 (the
 * text they decode to), else `[type, base64 of the bytes]` (also the older form of every value, still read).
 * A value too large to sit in the event (see `putLargeJson`) has a ref in place of the text or
 * base64: `[type, ref, "utf8"]` or `[type, ref]`, the ref naming the stream that holds that string.
 * The fold keeps every form as it is; only reads resolve refs.
 */
export const serializedValueSchema = z.union([
  // The form written today first: a union tries its members in order.
  z.tuple([z.string().min(1), z.string(), z.literal("utf8")]),
  z.tuple([z.string().min(1), z.string()]),
  z.tuple([z.string().min(1), largeJsonRefSchema]),
  z.tuple([z.string().min(1), largeJsonRefSchema, z.literal("utf8")]),
]);
export type SerializedValue = z.infer<typeof serializedValueSchema>;

/** A value's form (UTF-8 text or base64) around another payload: the same value moved to, or read back from, its own stream. */
export function inFormOf<P>(value: readonly [string, unknown, "utf8"?], payload: P): [string, P] | [string, P, "utf8"] {
  return value[2] === "utf8" ? [value[0], payload, "utf8"] : [value[0], payload];
}

/**
 * Streams of the checkpoint values kept apart: `checkpoint-value-{thread_id}-{sha256}`, content-addressed
 * within their thread, so that a thread's purge removes them with it (a copy writes its own). Older
 * logs also hold `checkpoint-value-{sha256}`, shared by whichever threads referenced the same value.
 */
export const CHECKPOINT_VALUE_STREAM_PREFIX = "checkpoint-value-";

/** The key (after the prefix) of a thread's own checkpoint value stream. */
export const checkpointValueKey = (threadId: string, sha256: string): string => `${threadId}-${sha256}`;

/** Whether a checkpoint value stream is `threadId`'s own (not an older, shared one, nor another thread's). */
export const isOwnCheckpointValueStream = (stream: string, threadId: string): boolean => stream.startsWith(`${CHECKPOINT_VALUE_STREAM_PREFIX}${threadId}-`);
/** Streams of the snapshots' contents: `checkpoint-snapshot-{thread_id}`. */
export const CHECKPOINT_SNAPSHOT_STREAM_PREFIX = "checkpoint-snapshot-";

export const channelVersionSchema = z.union([z.number(), z.string()]);

/** A checkpoint as stored: everything but `channel_values` (those live in blobs). */
export const storedCheckpointSchema = z.looseObject({
  v: z.number(),
  id: z.string().min(1),
  ts: z.string(),
  channel_versions: z.record(z.string(), channelVersionSchema),
  versions_seen: z.record(z.string(), z.record(z.string(), channelVersionSchema)),
});
export type StoredCheckpointJson = z.infer<typeof storedCheckpointSchema>;

/**
 * One channel blob written by a `put`: the value of `channel` at `version`. `value` null means the
 * channel has a version but no value in the checkpoint (an emptied channel); reads skip it.
 */
export const channelBlobSchema = z.object({
  channel: z.string(),
  version: channelVersionSchema,
  value: serializedValueSchema.nullable(),
});
export type ChannelBlob = z.infer<typeof channelBlobSchema>;

export const checkpointSavedSchema = z
  .object({
    thread_id: z.string().min(1),
    checkpoint_ns: z.string(),
    checkpoint_id: z.string().min(1),
    parent_checkpoint_id: z.string().min(1).nullable(),
    checkpoint: storedCheckpointSchema,
    metadata: JsonObjectSchema,
    /** Only the channels listed in the put's `newVersions`. */
    blobs: z.array(channelBlobSchema),
  })
  .refine((d) => d.checkpoint.id === d.checkpoint_id, {
    message: "checkpoint.id must equal checkpoint_id",
    path: ["checkpoint", "id"],
  });
export type CheckpointSaved = z.infer<typeof checkpointSavedSchema>;

/**
 * One pending write. `idx` is its key within the task: the write's position in the `putWrites`
 * call, or the negative index `WRITES_IDX_MAP` assigns to special channels (error, interrupt, …).
 * A non-negative (task_id, idx) already stored is kept (first write wins, so retries are
 * idempotent); a negative one is replaced by the newer write.
 */
export const pendingWriteSchema = z.object({
  idx: z.number().int(),
  channel: z.string(),
  value: serializedValueSchema,
});

export const pendingWritesSavedSchema = z.object({
  thread_id: z.string().min(1),
  checkpoint_ns: z.string(),
  checkpoint_id: z.string().min(1),
  task_id: z.string(),
  /** "" when the caller gave none (graph input, Command updates). */
  task_path: z.string(),
  writes: z.array(pendingWriteSchema),
});
export type PendingWritesSaved = z.infer<typeof pendingWritesSavedSchema>;

/** Every checkpoint, blob and pending write of the thread is gone (`deleteThread`). */
export const checkpointsDeletedSchema = z.object({
  thread_id: z.string().min(1),
});
export type CheckpointsDeleted = z.infer<typeof checkpointsDeletedSchema>;

/**
 * The thread's checkpoints are replaced by a copy of another thread's. Appended to the target
 * stream, in the same atomic append as the CheckpointSaved / PendingWritesSaved events that carry
 * the copied data (so the target stream is self-contained: its fold never reads the source).
 * `checkpoints` is the number of CheckpointSaved events that follow it in that append.
 */
export const checkpointsCopiedSchema = z.object({
  thread_id: z.string().min(1),
  from_thread_id: z.string().min(1),
  checkpoints: z.number().int().nonnegative(),
  /**
   * A copy larger than one append is written in several (see `appendInBatches`): these name the
   * operation (its event ids derive from it), the source's revision it copies, and how many
   * events follow this one, so that a retry after a crash can finish it.
   */
  operation_id: z.string().optional(),
  source_revision: z.string().optional(),
  events: z.number().int().nonnegative().optional(),
});
export type CheckpointsCopied = z.infer<typeof checkpointsCopiedSchema>;

/**
 * Checkpoints removed from the thread's history (a run rolled back by double-texting: what it
 * wrote is discarded, so the thread's state is again what it was before the run). Their pending
 * writes go with them; blobs stay (they are shared by version and harmless).
 */
export const checkpointsDiscardedSchema = z.object({
  thread_id: z.string().min(1),
  checkpoints: z.array(z.object({ checkpoint_ns: z.string(), checkpoint_id: z.string().min(1) })),
  reason: z.string().optional(),
});
export type CheckpointsDiscarded = z.infer<typeof checkpointsDiscardedSchema>;

/**
 * The `reason` of a discard that kept only the latest checkpoint of each namespace (`POST
 * /threads/prune` writes `pruned (keep_latest)`, the checkpoint TTL sweeper `pruned (checkpointer.ttl
 * keep_latest)`); such a discard may list no checkpoint at all (there was nothing older). Rollbacks
 * discard newer checkpoints under other reasons.
 */
export const TTL_KEEP_LATEST_REASON = "pruned (checkpointer.ttl keep_latest)";
export const isKeepLatestPrune = (reason: string | undefined): boolean => reason?.startsWith("pruned (") === true;

/**
 * A snapshot of the thread's fold as of the revision before this event: the content (in its own
 * stream, `ref`) holds, per namespace, the latest checkpoint with the blobs it reads and its
 * pending writes. A cache miss reads the stream backwards to the latest snapshot and folds
 * forward from there (see ThreadCheckpointsCache); the forward fold itself ignores the event.
 */
export const checkpointsSnapshotSchema = z.object({
  thread_id: z.string().min(1),
  ref: largeJsonRefSchema,
  /** CheckpointSaved events folded into the snapshot's state since the previous one (information). */
  checkpoints: z.number().int().nonnegative(),
});
export type CheckpointsSnapshot = z.infer<typeof checkpointsSnapshotSchema>;

export const CheckpointEventTypes = {
  CheckpointSaved: "CheckpointSaved",
  PendingWritesSaved: "PendingWritesSaved",
  CheckpointsDeleted: "CheckpointsDeleted",
  CheckpointsCopied: "CheckpointsCopied",
  CheckpointsDiscarded: "CheckpointsDiscarded",
  CheckpointsSnapshot: "CheckpointsSnapshot",
} as const;

export type CheckpointEvent =
  | { type: "CheckpointSaved"; data: CheckpointSaved }
  | { type: "PendingWritesSaved"; data: PendingWritesSaved }
  | { type: "CheckpointsDeleted"; data: CheckpointsDeleted }
  | { type: "CheckpointsCopied"; data: CheckpointsCopied }
  | { type: "CheckpointsDiscarded"; data: CheckpointsDiscarded }
  | { type: "CheckpointsSnapshot"; data: CheckpointsSnapshot };

/**
 * Event type → schema of its data, typed per event type (for the event catalogue, src/domain/events.ts).
 * Includes the chunks of the values and snapshot contents the saver keeps in streams of their own (`putLargeJson`).
 */
export const checkpointEventCatalogue = {
  ...largeJsonEventSchemas,
  [CheckpointEventTypes.CheckpointSaved]: checkpointSavedSchema,
  [CheckpointEventTypes.PendingWritesSaved]: pendingWritesSavedSchema,
  [CheckpointEventTypes.CheckpointsDeleted]: checkpointsDeletedSchema,
  [CheckpointEventTypes.CheckpointsCopied]: checkpointsCopiedSchema,
  [CheckpointEventTypes.CheckpointsDiscarded]: checkpointsDiscardedSchema,
  [CheckpointEventTypes.CheckpointsSnapshot]: checkpointsSnapshotSchema,
} satisfies Record<string, ZodType>;

/** The same schemas looked up by any event type name, for `withSchemas`. */
export const checkpointEventSchemas: Record<string, ZodType> = checkpointEventCatalogue;
