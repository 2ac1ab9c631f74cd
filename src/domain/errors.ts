/**
 * Why the application refused a command or a query, independent of the wire. Each edge maps the
 * kind to its own form: the HTTP routes to a status code (src/http/errors.ts), the A2A JSON-RPC
 * endpoint to a JSON-RPC error code (src/a2a/errors.ts).
 */
import { AppendTooLargeError } from "../eventstore/types.js";
import { InputLimitError } from "../util/json-limits.js";

export type FailureKind =
  /** The named resource does not exist (or the caller may not see it). */
  | "not_found"
  /** The resource exists but its current state forbids the command (already exists, busy, still running). */
  | "conflict"
  /** A field of the input is invalid; the detail names it. */
  | "invalid"
  /** The input is well-formed but cannot apply to this resource (e.g. a thread without a graph). */
  | "precondition"
  /** A value is too large to be stored (it must fit in one event); the detail says which and the limit. */
  | "too_large";

export class DomainError extends Error {
  constructor(
    readonly kind: FailureKind,
    readonly detail: string,
  ) {
    super(detail);
    this.name = "DomainError";
  }
}

export const notFound = (detail: string) => new DomainError("not_found", detail);
export const conflict = (detail: string) => new DomainError("conflict", detail);
export const invalid = (detail: string) => new DomainError("invalid", detail);
export const precondition = (detail: string) => new DomainError("precondition", detail);

/**
 * The refusals the store boundary makes on a request's behalf, as the application's own: event data
 * beyond the log's limits is invalid input, a value too large for one event is too large. Each edge
 * asks this before its own mapping, so no edge answers them as a fault of the server.
 */
export function refusalOf(error: unknown): DomainError | undefined {
  if (error instanceof DomainError) return error;
  if (error instanceof InputLimitError) return invalid(error.message);
  if (error instanceof AppendTooLargeError) return new DomainError("too_large", tooLargeToStore(error));
  return undefined;
}

/** What a stream of this kind stores whole, in one event (the values that can make an append too large). */
const STORED_WHOLE: [prefix: string, what: string][] = [
  ["thread-", "the thread's metadata and values"],
  ["store-", "the store item's value"],
  ["assistant-", "the assistant's config, context and metadata"],
  ["cron-", "the cron's payload"],
  ["run-", "the run's metadata and config"],
];

function tooLargeToStore(error: AppendTooLargeError): string {
  const what = STORED_WHOLE.find(([prefix]) => error.stream.startsWith(prefix))?.[1] ?? "the request's values";
  const size = error.size === undefined ? "" : ` (${error.size} bytes)`;
  return `Request too large to store: ${what}${size} must fit in one event of at most ${error.maxAppendSize} bytes`;
}

export const isNotFound = (error: unknown): boolean => error instanceof DomainError && error.kind === "not_found";
