import { getLargeJson, isLargeJsonRef, putLargeJsonText } from "./chunked-append.js";
import type { EventStore } from "./types.js";
import { isPlainObject } from "../util/json.js";

/**
 * Values too large to travel inside one event (a run's input, a thread's state) are written to a
 * stream of their own in chunks (EventStoreDB appends are at most 1 MiB); the event carries a
 * reference `{"__large_json__": ref}` instead, resolved where the value is read.
 *
 * A run's final values are usually already in the log: they are the data of the run's last `values`
 * output. Then the reference names that output, `{"__large_json__": {"stream": "run-{id}",
 * "revision": "12", "output": "values"}}`, instead of writing the same state a second time.
 */
export const LARGE_RUN_VALUE_BYTES = 256 * 1024;
/** The one key of a reference to a large value written beside its event. */
export const MARKER = "__large_json__";

/** Where a value that is the data of a run's output is: that output event. */
interface OutputRef {
  stream: string;
  /** The output event's revision in `stream` (decimal text). */
  revision: string;
  /** The output's SSE event name (`values`). */
  output: string;
}

function isOutputRef(ref: unknown): ref is OutputRef {
  return (
    isPlainObject(ref) &&
    Object.keys(ref).length === 3 &&
    typeof ref.stream === "string" &&
    ref.stream !== "" &&
    typeof ref.revision === "string" &&
    /^\d+$/.test(ref.revision) &&
    typeof ref.output === "string"
  );
}

/** Whether `value` is a reference whose ref passes `check`. */
function isMarker(value: unknown, check: (ref: unknown) => boolean): value is { [MARKER]: unknown } {
  return isPlainObject(value) && Object.keys(value).length === 1 && check(value[MARKER]);
}

/** Whether `value` is such a reference. */
export function isLargeValueMarker(value: unknown): value is { [MARKER]: unknown } {
  return isMarker(value, (ref) => isLargeJsonRef(ref) || isOutputRef(ref));
}

/**
 * Whether `value`'s JSON is surely too large for one event, without making it: the characters of its
 * strings and keys alone are over the limit (each takes at least one byte of its JSON). False means
 * "not sure": ask largeJsonText.
 */
export function surelyLarge(value: unknown): boolean {
  let chars = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === "string") chars += v.length;
    else if (Array.isArray(v)) for (const item of v) stack.push(item);
    else if (typeof v === "object" && v !== null) {
      for (const [key, item] of Object.entries(v)) {
        chars += key.length;
        stack.push(item);
      }
    }
    if (chars > LARGE_RUN_VALUE_BYTES) return true;
  }
  return false;
}

/** The JSON text of `value` when it is an object too large for one event; undefined otherwise. */
export function largeJsonText(value: unknown): string | undefined {
  if (value === undefined || value === null || typeof value !== "object") return undefined;
  const text = JSON.stringify(value);
  // A string has at least as many UTF-8 bytes as UTF-16 units: a long text is large without counting.
  if (text.length <= LARGE_RUN_VALUE_BYTES && Buffer.byteLength(text) <= LARGE_RUN_VALUE_BYTES) return undefined;
  return text;
}

/** A reference to a value written (as `text`, its JSON) in chunks to the stream `${prefix}${id}`. Idempotent per (prefix, id). */
export async function externalizeText(store: EventStore, prefix: string, id: string, text: string): Promise<unknown> {
  return { [MARKER]: await putLargeJsonText(store, prefix, id, text) };
}

/** The value itself when it is small; otherwise a reference to where it was written. Idempotent per (prefix, id). */
export async function externalizeIfLarge(store: EventStore, prefix: string, id: string, value: unknown): Promise<unknown> {
  const text = largeJsonText(value);
  return text === undefined ? value : externalizeText(store, prefix, id, text);
}

/** A reference to the data of the output event at `revision` of `stream` (named `output`), which is the value. */
export function outputReference(stream: string, revision: bigint, output: string): unknown {
  const ref: OutputRef = { stream, revision: String(revision), output };
  return { [MARKER]: ref };
}

/** A reference whose value is not in the log (never written completely, purged, or not what it names). */
export class LargeValueMissingError extends Error {
  readonly code = "LARGE_VALUE_MISSING";
  constructor(message: string) {
    super(message);
    this.name = "LargeValueMissingError";
  }
}

/** `holder` with its `values` read back when they are a reference (`holder` itself otherwise). */
export async function withValuesResolved<T extends { values?: unknown }>(store: EventStore, holder: T): Promise<T> {
  return isLargeValueMarker(holder.values) ? { ...holder, values: await resolveLarge(store, holder.values) } : holder;
}

/** The value a reference points to (anything else as it is). */
export async function resolveLarge(store: EventStore, value: unknown): Promise<unknown> {
  if (!isLargeValueMarker(value)) return value;
  const ref = value[MARKER];
  if (isOutputRef(ref)) return resolveOutput(store, ref);
  return getLargeJson(store, ref as Parameters<typeof getLargeJson>[1]);
}

async function resolveOutput(store: EventStore, ref: OutputRef): Promise<unknown> {
  const revision = BigInt(ref.revision);
  const [event] = await store.readStream(ref.stream, { fromRevision: revision, maxCount: 1 });
  const data = event?.data as { event?: unknown; data?: unknown } | undefined;
  if (!event || event.revision !== revision || event.type !== "RunOutput" || data?.event !== ref.output) {
    throw new LargeValueMissingError(`the ${ref.output} output at revision ${ref.revision} of stream "${ref.stream}" is not in the log`);
  }
  // An output too large for one event was itself written beside the run, in chunks.
  const inner = data.data;
  return isMarker(inner, isLargeJsonRef) ? getLargeJson(store, inner[MARKER] as Parameters<typeof getLargeJson>[1]) : inner;
}
