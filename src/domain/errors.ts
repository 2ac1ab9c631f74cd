/**
 * Why the application refused a command or a query, independent of the wire. Each edge maps the
 * kind to its own form: the HTTP routes to a status code (src/http/errors.ts), the A2A JSON-RPC
 * endpoint to a JSON-RPC error code (src/a2a/errors.ts).
 */
export type FailureKind =
  /** The named resource does not exist (or the caller may not see it). */
  | "not_found"
  /** The resource exists but its current state forbids the command (already exists, busy, still running). */
  | "conflict"
  /** A field of the input is invalid; the detail names it. */
  | "invalid"
  /** The input is well-formed but cannot apply to this resource (e.g. a thread without a graph). */
  | "precondition";

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

export const isNotFound = (error: unknown): boolean => error instanceof DomainError && error.kind === "not_found";
