/**
 * Logical writes larger than one append (EventStoreDB refuses an append over MAX_APPEND_SIZE).
 *
 * - `appendInBatches` writes a list of events as several appends, each under the limit, in order.
 *   Event ids are derived from an operation id and the event's index (UUID v5), so running the same
 *   operation again after a crash can tell what was written from what was not: its caller reads the
 *   stream and passes what is there as `skip` (the store does not: EventStoreDB recognises an append
 *   with expected revision "any" by its ids only while it remembers them, not after a restart).
 * - `putLargeJson` / `getLargeJson` keep one JSON value of any size in its own stream as text
 *   chunks; the small `LargeJsonRef` is what callers store in their own events. Chunk ids depend on
 *   the content, so a retried put is a no-op and a reader checks the reassembled text by its hash.
 */
import { createHash } from "node:crypto";
import * as z from "zod";
import { v5 as uuidv5 } from "uuid";
import { AppendTooLargeError, MAX_APPEND_SIZE, eventSize, type EventData, type EventStore } from "./types.js";
import { frozenFlatData, jsonTextOf } from "./json-text.js";

/** Namespace of the event ids derived here (a fixed random UUID). */
const NAMESPACE = "2f4c7c55-6a0e-4d55-9a49-6c1f0e3b8d21";

/**
 * Bytes one batch may hold, counted on the data as written: the store's limit less a margin, since
 * EventStoreDB's own count of an event may differ slightly from ours (`eventSize`), and less a
 * quarter, since encryption at rest seals content as base64 (four bytes for three) before the store
 * counts it.
 */
export const APPEND_BUDGET = Math.floor(((MAX_APPEND_SIZE - 16 * 1024) * 3) / 4);

/** The id of the `index`th event of an operation: the same on every retry. */
export function operationEventId(operationId: string, index: number): string {
  return uuidv5(`${operationId}:${index}`, NAMESPACE);
}

/** Bytes an event counts against the append limit. */
export function sizeOfEvent(event: EventData): number {
  const metadata = event.metadata && Object.keys(event.metadata).length > 0 ? JSON.stringify(event.metadata) : null;
  return eventSize(event.type, jsonTextOf(event.data) as string, metadata);
}

/**
 * Groups consecutive events into batches of at most `budget` bytes (never splits an event). An
 * event larger than the budget alone is refused: the caller must make it smaller (`putLargeJson`).
 */
export function planBatches(stream: string, events: readonly EventData[], budget = APPEND_BUDGET): EventData[][] {
  const batches: EventData[][] = [];
  let current: EventData[] = [];
  let bytes = 0;
  for (const event of events) {
    const size = sizeOfEvent(event);
    if (size > budget) throw new AppendTooLargeError(stream, MAX_APPEND_SIZE, size);
    if (current.length > 0 && bytes + size > budget) {
      batches.push(current);
      current = [];
      bytes = 0;
    }
    current.push(event);
    bytes += size;
  }
  if (current.length > 0) batches.push(current);
  return batches;
}

export interface BatchedAppendOptions {
  /** Names the logical write; the same id on a retry makes the retry idempotent. */
  operationId: string;
  /** Bytes per append (default APPEND_BUDGET). */
  budget?: number;
  /** Events already in the stream from an earlier attempt (a prefix): they are not sent again. */
  skip?: number;
  /** Called after each acknowledged append with its events and the revision of its last one. */
  onAppended?: (events: EventData[], lastRevision: bigint) => Promise<void> | void;
}

/**
 * Appends `events` to `stream` as several appends (expected revision "any"), each at most the
 * budget, in order, with ids derived from the operation id. Not atomic: a reader may see a prefix
 * while it runs or after a crash; running it again with `skip` = the prefix written (found by the
 * ids) completes it without duplicates. Returns the revision of the last event (-1n when there were none).
 */
export async function appendInBatches(store: EventStore, stream: string, events: readonly EventData[], options: BatchedAppendOptions): Promise<bigint> {
  const withIds = events.map((e, i) => ({ ...e, id: operationEventId(options.operationId, i) }));
  let last = -1n;
  for (const batch of planBatches(stream, withIds.slice(options.skip ?? 0), options.budget)) {
    const result = await store.append(stream, batch, "any");
    last = result.nextExpectedRevision;
    await options.onAppended?.(batch, last);
  }
  return last;
}

// ---------------------------------------------------------------------------------------------
// Large JSON values in a stream of their own

export const LARGE_JSON_CHUNK = "LargeJsonChunk";

/** Where a large JSON value is and how to check it. Small: stored in place of the value. */
export const largeJsonRefSchema = z.object({
  stream: z.string().min(1),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  chunks: z.number().int().positive(),
  /** UTF-8 bytes of the value's JSON text. */
  bytes: z.number().int().nonnegative(),
});
export type LargeJsonRef = z.infer<typeof largeJsonRefSchema>;

export const largeJsonChunkSchema = z.object({
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  index: z.number().int().nonnegative(),
  count: z.number().int().positive(),
  /** A slice of the value's JSON text. */
  text: z.string(),
});
export type LargeJsonChunk = z.infer<typeof largeJsonChunkSchema>;

/** For the event catalogue (`withSchemas`). */
export const largeJsonEventSchemas = { [LARGE_JSON_CHUNK]: largeJsonChunkSchema };

/** Whether an event is a chunk of a large value (its data checked against `largeJsonChunkSchema` when appended). */
const isLargeJsonChunk = <E extends { type: string; data: unknown }>(event: E): event is E & { type: typeof LARGE_JSON_CHUNK; data: LargeJsonChunk } =>
  event.type === LARGE_JSON_CHUNK;

/**
 * Characters per chunk. A character of JSON text takes at most 3 bytes in a chunk's data (a
 * non-ASCII BMP character; `"` and `\` are escaped to 2; a surrogate pair is 4 bytes for 2).
 */
const CHUNK_CHARS = Math.floor((APPEND_BUDGET - 512) / 3);

function sliceText(text: string): string[] {
  const pieces: string[] = [];
  for (let at = 0; at < text.length;) {
    let end = Math.min(text.length, at + CHUNK_CHARS);
    // Never cut a surrogate pair in two (each half would be escaped on its own).
    const code = text.charCodeAt(end - 1);
    if (end < text.length && code >= 0xd800 && code <= 0xdbff) end -= 1;
    pieces.push(text.slice(at, end));
    at = end;
  }
  return pieces.length > 0 ? pieces : [""];
}

/**
 * Stores `value` (any JSON value) in the stream `${streamPrefix}${id}`, one chunk per append, and
 * returns its ref. Idempotent and resumable: chunk ids come from the content, so putting the same
 * value again (after a crash, or twice) writes only the chunks that are missing. Putting another
 * value under the same id adds its chunks beside the first (the ref tells them apart).
 */
export async function putLargeJson(store: EventStore, streamPrefix: string, id: string, value: unknown): Promise<LargeJsonRef> {
  const text = JSON.stringify(value);
  if (text === undefined) throw new TypeError("putLargeJson: the value is not JSON-serialisable");
  return putLargeJsonText(store, streamPrefix, id, text);
}

/**
 * putLargeJson for a value already serialised (`text` is its JSON): a caller that had to measure it
 * does not serialise it twice. `textSha256`: the hex SHA-256 of `text`, when the caller needed it too
 * (a content address), so that it is not computed twice.
 */
export async function putLargeJsonText(store: EventStore, streamPrefix: string, id: string, text: string, textSha256?: string): Promise<LargeJsonRef> {
  const sha256 = textSha256 ?? sha256Hex(text);
  const stream = `${streamPrefix}${id}`;
  const pieces = sliceText(text);
  const ref: LargeJsonRef = { stream, sha256, chunks: pieces.length, bytes: Buffer.byteLength(text, "utf8") };
  // What an earlier put of this value wrote (in order, so a prefix) is not sent again: this does
  // not rely on the store recognising a retried append (EventStoreDB only does for recent ones).
  const written = await chunksWritten(store, ref);
  if (written === pieces.length) return ref;
  await appendInBatches(
    store,
    stream,
    // Frozen, so that measuring a chunk for its batch and storing it serialise it once.
    pieces.map((piece, index) => ({ type: LARGE_JSON_CHUNK, data: frozenFlatData({ sha256, index, count: pieces.length, text: piece }) })),
    { operationId: `${stream}:${sha256}`, skip: written },
  );
  return ref;
}

/** How many of the ref's chunks, from the first on, are in its stream (ids tell, no text is compared). */
async function chunksWritten(store: EventStore, ref: LargeJsonRef): Promise<number> {
  const operationId = `${ref.stream}:${ref.sha256}`;
  let next = 0;
  for (let from = 0n; ;) {
    const page = await store.readStream(ref.stream, { fromRevision: from, maxCount: 64 });
    for (const event of page) if (next < ref.chunks && event.id === operationEventId(operationId, next)) next += 1;
    if (page.length < 64 || next === ref.chunks) return next;
    from = page[page.length - 1].revision + 1n;
  }
}

/** A ref's chunks are missing or do not hash to it (never written completely, or tampered with). */
export class LargeJsonMissingError extends Error {
  readonly code = "LARGE_JSON_MISSING";
  constructor(
    readonly ref: LargeJsonRef,
    reason: string,
  ) {
    super(`large JSON value ${ref.sha256} in stream "${ref.stream}": ${reason}`);
    this.name = "LargeJsonMissingError";
  }
}

/** The value a ref names, reassembled from its stream and checked against its hash. */
export async function getLargeJson(store: EventStore, ref: LargeJsonRef): Promise<unknown> {
  const pieces = new Array<string | undefined>(ref.chunks);
  let found = 0;
  // Pages: a stream may hold several values (one id, several puts); stop once ours is whole.
  for (let from = 0n; found < ref.chunks;) {
    const page = await store.readStream(ref.stream, { fromRevision: from, maxCount: 64 });
    for (const event of page) {
      if (!isLargeJsonChunk(event)) continue;
      const chunk = event.data;
      if (chunk.sha256 !== ref.sha256 || chunk.count !== ref.chunks || pieces[chunk.index] !== undefined) continue;
      pieces[chunk.index] = chunk.text;
      found += 1;
    }
    if (page.length < 64) break;
    from = page[page.length - 1].revision + 1n;
  }
  if (found < ref.chunks) throw new LargeJsonMissingError(ref, `${ref.chunks - found} of ${ref.chunks} chunks missing`);
  const text = pieces.join("");
  if (sha256Hex(text) !== ref.sha256) throw new LargeJsonMissingError(ref, "content does not match its hash");
  return JSON.parse(text);
}

/** Hex SHA-256 of a text's UTF-8 bytes: what a ref holds of its value's JSON. */
export function sha256Hex(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

export function isLargeJsonRef(value: unknown): value is LargeJsonRef {
  return largeJsonRefSchema.safeParse(value).success;
}
