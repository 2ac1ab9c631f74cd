import { z, type ZodType } from "zod";

/**
 * The LangGraph checkpointer's event catalogue. One stream per thread, `checkpoints-{thread_id}`;
 * every checkpoint namespace of the thread (root "" and subgraphs) lives in that stream.
 *
 * Values that only LangGraph's serializer understands (channel values, pending-write values) are
 * stored as `[type, base64]` pairs produced by the saver's `serde.dumpsTyped`. Checkpoints (without
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

/** A value serialized with `serde.dumpsTyped`: `[type, base64 of the bytes]`. */
export const serializedValueSchema = z.tuple([z.string().min(1), z.string()]);
export type SerializedValue = z.infer<typeof serializedValueSchema>;

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
    metadata: z.record(z.string(), z.unknown()),
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
export type StoredPendingWrite = z.infer<typeof pendingWriteSchema>;

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

export const CheckpointEventTypes = {
  CheckpointSaved: "CheckpointSaved",
  PendingWritesSaved: "PendingWritesSaved",
  CheckpointsDeleted: "CheckpointsDeleted",
  CheckpointsCopied: "CheckpointsCopied",
  CheckpointsDiscarded: "CheckpointsDiscarded",
} as const;

export type CheckpointEvent =
  | { type: "CheckpointSaved"; data: CheckpointSaved }
  | { type: "PendingWritesSaved"; data: PendingWritesSaved }
  | { type: "CheckpointsDeleted"; data: CheckpointsDeleted }
  | { type: "CheckpointsCopied"; data: CheckpointsCopied }
  | { type: "CheckpointsDiscarded"; data: CheckpointsDiscarded };

/** Event type → schema of its data, for `withSchemas`. */
export const checkpointEventSchemas: Record<string, ZodType> = {
  [CheckpointEventTypes.CheckpointSaved]: checkpointSavedSchema,
  [CheckpointEventTypes.PendingWritesSaved]: pendingWritesSavedSchema,
  [CheckpointEventTypes.CheckpointsDeleted]: checkpointsDeletedSchema,
  [CheckpointEventTypes.CheckpointsCopied]: checkpointsCopiedSchema,
  [CheckpointEventTypes.CheckpointsDiscarded]: checkpointsDiscardedSchema,
};
