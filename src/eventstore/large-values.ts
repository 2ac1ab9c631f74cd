import { getLargeJson, isLargeJsonRef, putLargeJsonText } from "./chunked-append.js";
import type { EventStore } from "./types.js";
import { isPlainObject } from "../util/json.js";

/**
 * Values too large to travel inside one event (a run's input, a thread's state) are written to a
 * stream of their own in chunks (EventStoreDB appends are at most 1 MiB); the event carries a
 * reference `{"__large_json__": ref}` instead, resolved where the value is read.
 */
export const LARGE_RUN_VALUE_BYTES = 256 * 1024;
const MARKER = "__large_json__";

/** Whether `value` is such a reference. */
export function isLargeValueMarker(value: unknown): value is { [MARKER]: unknown } {
  return isPlainObject(value) && Object.keys(value).length === 1 && isLargeJsonRef(value[MARKER]);
}

/** The value itself when it is small; otherwise a reference to where it was written. Idempotent per (prefix, id). */
export async function externalizeIfLarge(store: EventStore, prefix: string, id: string, value: unknown): Promise<unknown> {
  if (value === undefined || value === null || typeof value !== "object") return value;
  const text = JSON.stringify(value);
  // A string has at least as many UTF-8 bytes as UTF-16 units: a long text is large without counting.
  if (text.length <= LARGE_RUN_VALUE_BYTES && Buffer.byteLength(text) <= LARGE_RUN_VALUE_BYTES) return value;
  return { [MARKER]: await putLargeJsonText(store, prefix, id, text) };
}

/** The value a reference points to (anything else as it is). */
export async function resolveLarge(store: EventStore, value: unknown): Promise<unknown> {
  if (!isLargeValueMarker(value)) return value;
  return getLargeJson(store, value[MARKER] as Parameters<typeof getLargeJson>[1]);
}
