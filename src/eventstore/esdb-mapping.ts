/**
 * Translations between the event store port and `@eventstore/db-client` 6.x, each in exactly one place:
 * expected revisions, current revisions, global positions, recorded events, system events, errors.
 */
import {
  ANY,
  NO_STREAM,
  STREAM_EXISTS,
  MaxAppendSizeExceededError,
  WrongExpectedVersionError as ClientWrongExpectedVersionError,
  type AppendExpectedRevision,
  type Position,
  type ResolvedEvent,
} from "@eventstore/db-client";
import {
  AppendTooLargeError,
  StoreUnavailableError,
  WrongExpectedVersionError,
  type CurrentRevision,
  type ExpectedRevision,
  type RecordedEvent,
} from "./types.js";
import { isPlainObject } from "../util/json.js";

/**
 * THE mapping of our expected revision to the client's append options. Nowhere else.
 *
 * Trap: `@eventstore/db-client` 6.x names this option `expectedRevision`. The newer `@kurrent/kurrentdb-client`
 * renamed it `streamState` and silently ignores `expectedRevision` (the append then runs as ANY, i.e. without
 * any concurrency check). If this adapter ever moves to that client, this function is the one thing to change
 * (return `{ streamState: ... }`).
 */
export function toAppendOptions(expected: ExpectedRevision): { expectedRevision: AppendExpectedRevision } {
  switch (expected) {
    case "any":
      return { expectedRevision: ANY };
    case "no_stream":
      return { expectedRevision: NO_STREAM };
    case "stream_exists":
      return { expectedRevision: STREAM_EXISTS };
    default:
      return { expectedRevision: expected };
  }
}

/** The client reports "no stream" as the string, or (old servers, error metadata) as revision -1. */
export function toCurrentRevision(actual: unknown): CurrentRevision {
  if (typeof actual === "bigint") return actual < 0n ? "no_stream" : actual;
  if (typeof actual === "number") return actual < 0 ? "no_stream" : BigInt(actual);
  if (typeof actual === "string" && /^\d+$/.test(actual)) return BigInt(actual);
  return "no_stream";
}

/**
 * Global positions. EventStoreDB gives every event a transaction-file position `{ commit, prepare }`; for
 * events written through gRPC (each one "self-committed": implicit transactions, the only kind gRPC can write)
 * the server reports `commit === prepare ===` the event's own log position, in `$all` reads, stream reads and
 * subscriptions alike. Our bigint position is therefore `commit`: unique per event and strictly increasing in
 * `$all` order, and it round-trips exactly to `{ commit: p, prepare: p }` for `readAll`/`subscribeToAll` starts.
 * (Only legacy explicit TCP transactions, which this service never uses, break `commit === prepare`.)
 */
export function fromClientPosition(position: Position | undefined): bigint | undefined {
  if (!position) return undefined;
  const commit = position.commit;
  // The server encodes "no position" as -1, which arrives as 2^64 - 1 through the uint64 field.
  if (commit < 0n || commit >= 1n << 63n) return undefined;
  return commit;
}

export function toClientPosition(position: bigint): Position {
  return { commit: position, prepare: position };
}

/** System streams and events (`$`-prefixed) are never part of our view of `$all`. */
export function isSystem(streamId: string, type: string): boolean {
  return streamId.startsWith("$") || type.startsWith("$");
}

/** Converts what the client read; undefined for an unresolvable link (we never ask the server to resolve links). */
export function toRecordedEvent(resolved: ResolvedEvent): RecordedEvent | undefined {
  const e = resolved.event;
  if (!e) return undefined;
  let data: unknown = e.data;
  if (!e.isJson && data instanceof Uint8Array) data = decodeJson(data) ?? data;
  let metadata: unknown = e.metadata;
  if (metadata instanceof Uint8Array) metadata = decodeJson(metadata);
  return {
    streamId: e.streamId,
    id: e.id,
    type: e.type,
    revision: e.revision,
    // A stream read on a server that cannot tell the position (not a self-committed event): -1n, documented.
    position: fromClientPosition(e.position) ?? -1n,
    data,
    metadata: isPlainObject(metadata) && !(metadata instanceof Uint8Array) ? metadata : {},
    created: e.created,
  };
}

function decodeJson(bytes: Uint8Array): unknown {
  if (bytes.length === 0) return undefined;
  try {
    return JSON.parse(Buffer.from(bytes).toString("utf8"));
  } catch {
    return undefined;
  }
}

/** The client's conflict error, as ours: the stream, what we expected, what the stream actually is. */
export function toWrongExpectedVersion(error: unknown, stream: string, expected: ExpectedRevision): WrongExpectedVersionError | undefined {
  if (!(error instanceof ClientWrongExpectedVersionError)) return undefined;
  return new WrongExpectedVersionError(stream, expected, toCurrentRevision(error.actualVersion));
}

/** The server's `MaximumAppendSizeExceeded` (the append was refused whole), as ours. */
export function toAppendTooLarge(error: unknown, stream: string): AppendTooLargeError | undefined {
  if (!(error instanceof MaxAppendSizeExceededError)) return undefined;
  const max = Number.isFinite(error.maxAppendSize) ? error.maxAppendSize : 1_048_576;
  return new AppendTooLargeError(stream, max);
}

/** Hides the password of `esdb://user:password@host`. */
export function redactConnectionString(connectionString: string): string {
  return connectionString.replace(/^([a-z+]+:\/\/[^:@/]+:)[^@/]*@/i, "$1***@");
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, " ").trim();
}

const UNAVAILABLE = 14;
const DEADLINE_EXCEEDED = 4;
const CANCELLED = 1;

/**
 * Connectivity failures (server down, unreachable, timed out, connection reset) and `not leader`
 * answers (the client reconnects to the leader it names; the next try goes there) as
 * StoreUnavailableError: failures that go away by themselves, so an operation may be tried again.
 */
export function toStoreUnavailable(error: unknown, connectionString: string): StoreUnavailableError | undefined {
  if (error instanceof StoreUnavailableError) return error;
  const e = error as { type?: unknown; code?: unknown; details?: unknown; message?: unknown } | null;
  if (!e || typeof e !== "object") return undefined;
  const connectivity =
    e.type === "unavailable" ||
    e.type === "deadline-exceeded" ||
    e.type === "cancelled" ||
    e.type === "not-leader" ||
    e.code === UNAVAILABLE ||
    e.code === DEADLINE_EXCEEDED ||
    (e.code === CANCELLED && e.type !== undefined);
  if (!connectivity) return undefined;
  const raw = (e as { _raw?: { details?: unknown } })._raw; // the client's CommandError keeps the gRPC error here
  const details = typeof e.details === "string" && e.details ? e.details : typeof raw?.details === "string" ? raw.details : "";
  const reason = oneLine(details || String(e.message ?? "unknown error"))
    .replace(/\s*Resolution note:\s*$/, "")
    .replace(/\.$/, "");
  return new StoreUnavailableError(`cannot reach EventStoreDB at ${redactConnectionString(connectionString)}: ${reason}`, {
    cause: error,
  });
}
