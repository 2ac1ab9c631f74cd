/**
 * Argument checking shared by the event store adapters. Every adapter must refuse the same bad arguments with the
 * same TypeError, before touching its storage, so that callers see one port whatever the backend.
 */
import type { AllSubscriptionOptions, Direction, EventData, ReadAllOptions, ReadStreamOptions, StreamSubscriptionOptions } from "./types.js";
import { jsonTextOf } from "./json-text.js";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

// ------------------------------------------------------------------------------------------------------ append

/** How an adapter prepares the events of an append: where they differ, the adapter chooses. */
export interface EventPolicy {
  /** The id of an event that came without one (each adapter picks the UUID version that suits its storage). */
  newId: () => string;
  /**
   * When JSON.stringify throws on the data (BigInt, cycle): true turns it into "data is not JSON-serialisable: …",
   * false lets JSON.stringify's own TypeError through.
   */
  explainUnserialisable?: boolean;
  /** The store holds what this process appends in memory: it needs the data's text too where the log stores another form. */
  holdsAppended?: boolean;
}

/** One event of an append, checked: id settled (lower-case), data known to serialise, metadata an object or absent. */
export interface CheckedEvent {
  id: string;
  type: string;
  /** What the log stores: the event's storedData when it came with one, else its data. */
  stored: unknown;
  /** `stored` as JSON text. */
  json: string;
  /** The data as given, as JSON text, when the policy holds appended events (the same string as `json` when nothing else is stored). */
  dataJson: string | undefined;
  /** Absent or empty metadata are both undefined: nothing to store. */
  metadata: Record<string, unknown> | undefined;
}

/** append's arguments, checked in this order: stream, expected revision, events; returns the events prepared. */
export function checkAppend<T extends { id: string }>(
  stream: string,
  events: unknown,
  expected: unknown,
  policy: EventPolicy,
  prepare: (event: CheckedEvent) => T,
): T[] {
  checkStream(stream);
  checkExpected(expected);
  return checkEvents(events, policy, prepare);
}

/**
 * Checks the events of an append and turns each, once checked, into the adapter's own form (`prepare` runs per
 * event, in order, so that a failure of the adapter's own conversion surfaces at the same event as a check would).
 * Two events with one id in one append cannot be told apart from a retry: refused.
 */
function checkEvents<T extends { id: string }>(events: unknown, policy: EventPolicy, prepare: (event: CheckedEvent) => T): T[] {
  if (!Array.isArray(events)) throw new TypeError("append: events must be an array");
  // Array.from visits the holes of a sparse array too (map would skip them), so each is checked.
  const prepared = Array.from(events, (event: EventData, index) => prepare(checkEvent(event, index, policy)));
  if (new Set(prepared.map((e) => e.id)).size !== prepared.length) {
    throw new TypeError("append: the same event id appears twice in one append");
  }
  return prepared;
}

function checkEvent(event: EventData, index: number, policy: EventPolicy): CheckedEvent {
  if (typeof event !== "object" || event === null) throw new TypeError(`append: event #${index} is not an object`);
  if (typeof event.type !== "string" || event.type === "") throw new TypeError(`append: event #${index} has no type`);
  let id: string;
  if (event.id === undefined) id = policy.newId();
  else if (typeof event.id === "string" && UUID.test(event.id)) id = event.id.toLowerCase();
  else throw new TypeError(`append: event #${index} id must be a UUID, got ${String(event.id)}`);
  const explain = policy.explainUnserialisable ?? false;
  const stored = event.storedData === undefined ? event.data : event.storedData;
  const json = event.storedData !== undefined && event.storedText !== undefined ? event.storedText : toJson(stored, index, explain);
  const dataJson = !policy.holdsAppended ? undefined : stored === event.data ? json : (event.dataText ?? toJson(event.data, index, explain));
  const meta = event.metadata;
  if (meta !== undefined && (typeof meta !== "object" || meta === null || Array.isArray(meta))) {
    throw new TypeError(`append: event #${index} metadata must be an object`);
  }
  return {
    id,
    type: event.type,
    stored,
    json,
    dataJson,
    metadata: meta === undefined || Object.keys(meta).length === 0 ? undefined : meta,
  };
}

/** The data must serialise (not undefined, no BigInt, no cycle): the stores keep JSON. */
function toJson(data: unknown, index: number, explain: boolean): string {
  let json: string | undefined;
  try {
    json = jsonTextOf(data);
  } catch (error) {
    if (!explain) throw error;
    throw new TypeError(`append: event #${index} data is not JSON-serialisable: ${error instanceof Error ? error.message : String(error)}`);
  }
  if (json === undefined) throw new TypeError(`append: event #${index} data is not JSON-serialisable`);
  return json;
}

function checkStream(stream: unknown): asserts stream is string {
  if (typeof stream !== "string" || stream === "") throw new TypeError("stream name must be a non-empty string");
}

/** A revision to expect is one of the three words or a revision that can exist (>= 0). */
function checkExpected(expected: unknown): void {
  if (expected === "any" || expected === "no_stream" || expected === "stream_exists") return;
  if (typeof expected === "bigint" && expected >= 0n) return;
  throw new TypeError(`append: bad expected revision ${String(expected)}`);
}

// ------------------------------------------------------------------------------------------------------- reads

export interface ReadStreamArguments {
  direction: Direction;
  /** undefined: no limit. */
  maxCount: number | undefined;
  /** Inclusive start, defaulted by direction: a backwards read starts at the end. */
  from: bigint | "start" | "end";
}

/** readStream's arguments, checked in this order: stream, direction, maxCount, fromRevision. */
export function readStreamArguments(stream: string, options: ReadStreamOptions): ReadStreamArguments {
  checkStream(stream);
  const direction = options.direction ?? "forwards";
  if (direction !== "forwards" && direction !== "backwards") throw new TypeError(`readStream: bad direction ${String(direction)}`);
  const maxCount = checkMaxCount(options.maxCount);
  const from = checkFrom(options.fromRevision ?? (direction === "forwards" ? "start" : "end"), "readStream", "fromRevision", true);
  return { direction, maxCount, from };
}

/** readAll's arguments, checked in this order: fromPosition, maxCount. No "end": reading from the end gives nothing. */
export function readAllArguments(options: ReadAllOptions): { from: bigint | "start"; maxCount: number | undefined } {
  const from = checkFrom(options.fromPosition ?? "start", "readAll", "fromPosition", false);
  const maxCount = checkMaxCount(options.maxCount);
  return { from, maxCount };
}

/** maxCount is a count: a non-negative integer, or Infinity / absent for no limit (returned as undefined). */
function checkMaxCount(maxCount: number | undefined): number | undefined {
  if (maxCount === undefined || maxCount === Infinity) return undefined;
  if (!Number.isSafeInteger(maxCount) || maxCount < 0) throw new TypeError(`maxCount must be a non-negative integer, got ${maxCount}`);
  return maxCount;
}

// ----------------------------------------------------------------------------------------------- subscriptions

/** subscribeToStream's exclusive start, checked after the stream name; default "start". */
export function streamSubscriptionStart(stream: string, options: StreamSubscriptionOptions): bigint | "start" | "end" {
  checkStream(stream);
  return checkFrom(options.fromRevision ?? "start", "subscribeToStream", "fromRevision", true);
}

/** subscribeToAll's exclusive start; default "start". */
export function allSubscriptionStart(options: AllSubscriptionOptions): bigint | "start" | "end" {
  return checkFrom(options.fromPosition ?? "start", "subscribeToAll", "fromPosition", true);
}

// ------------------------------------------------------------------------------------------------------ shared

/** A start point: a revision or position that can exist (>= 0), "start", or "end" where the operation allows it. */
function checkFrom(from: unknown, operation: string, option: string, endAllowed: true): bigint | "start" | "end";
function checkFrom(from: unknown, operation: string, option: string, endAllowed: false): bigint | "start";
function checkFrom(from: unknown, operation: string, option: string, endAllowed: boolean): bigint | "start" | "end" {
  if (typeof from === "bigint") {
    if (from < 0n) throw new TypeError(`${option} must not be negative, got ${from}`);
    return from;
  }
  if (from === "start" || (endAllowed && from === "end")) return from;
  throw new TypeError(`${operation}: bad ${option} ${String(from)}`);
}
