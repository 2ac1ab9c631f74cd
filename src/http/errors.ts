import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import { hasZodFastifySchemaValidationErrors, isResponseSerializationError } from "fastify-type-provider-zod";
import { InvalidEventError, StoreUnavailableError, WrongExpectedVersionError } from "../eventstore/types.js";
import { refusalOf, type FailureKind } from "../domain/errors.js";
import { AuthError } from "../app/auth/engine.js";

/** An error of the HTTP edge itself (a malformed header, a missing asset): its status with a `{"detail": ...}` body. */
export class HttpError extends Error {
  override name = "HttpError";
  constructor(
    readonly statusCode: number,
    readonly detail: string,
  ) {
    super(detail);
  }
}

/** The HTTP form of the application's refusals. */
export const STATUS_OF_FAILURE: Record<FailureKind, number> = {
  not_found: 404,
  conflict: 409,
  invalid: 422,
  precondition: 400,
  too_large: 413,
};

interface ZodLikeIssue {
  instancePath?: string;
  message?: string;
  params?: { issue?: { path?: PropertyKey[]; message?: string } };
}

/** "body.limit: Too big: expected number to be <=1000" — which field, and why. */
function describeValidation(context: string | undefined, issues: ZodLikeIssue[]): string {
  const issue = issues[0] ?? {};
  const pathParts = issue.params?.issue?.path ?? issue.instancePath?.split("/").filter(Boolean) ?? [];
  const where = [context ?? "body", ...pathParts.map(String)].join(".");
  return `${where}: ${issue.params?.issue?.message ?? issue.message ?? "invalid"}`;
}

/** Maps every failure to a JSON `{"detail"}` body; validation → 422, never a 500 for bad input. */
export function errorHandler(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  if (error instanceof HttpError) {
    reply.code(error.statusCode).send({ detail: error.detail });
    return;
  }
  if (error instanceof AuthError) {
    reply.headers(error.headers).code(error.status).send({ detail: error.detail });
    return;
  }
  const refusal = refusalOf(error);
  if (refusal) {
    reply.code(STATUS_OF_FAILURE[refusal.kind]).send({ detail: refusal.detail });
    return;
  }
  if (hasZodFastifySchemaValidationErrors(error)) {
    reply.code(422).send({ detail: describeValidation(error.validationContext, error.validation as ZodLikeIssue[]) });
    return;
  }
  if (error instanceof WrongExpectedVersionError) {
    reply.code(409).send({ detail: "Conflict: the resource was changed concurrently, retry the request" });
    return;
  }
  if (error instanceof StoreUnavailableError) {
    // The log could not be reached in time: the request may be tried again (here or elsewhere).
    request.log.warn({ err: error }, "event log unavailable");
    reply
      .header("retry-after", String(error.retryAfterSeconds))
      .code(503)
      .send({ detail: "Service unavailable: the event log cannot be reached right now, try again later" });
    return;
  }
  if (error instanceof InvalidEventError && error.position !== undefined) {
    // A stored event of this entity cannot be read or folded: said for this one entity (never a bare 500).
    request.log.error({ err: error }, "stored event cannot be read");
    reply.code(500).send({ detail: `${error.message} (GET /audit/quarantine lists what the server skipped)` });
    return;
  }
  if (isResponseSerializationError(error)) {
    request.log.error({ err: error }, "response did not match its schema");
    reply.code(500).send({ detail: "Internal Server Error" });
    return;
  }
  switch (error.code) {
    case "FST_ERR_CTP_INVALID_JSON_BODY":
    case "FST_ERR_CTP_EMPTY_JSON_BODY":
      reply.code(422).send({ detail: `Invalid JSON in request body: ${error.message}` });
      return;
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      reply.code(413).send({ detail: "Request body is too large" });
      return;
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
      reply.code(415).send({ detail: `Unsupported Content-Type: ${request.headers["content-type"] ?? "none"}` });
      return;
  }
  if (typeof error.statusCode === "number" && error.statusCode >= 400 && error.statusCode < 500) {
    reply.code(error.statusCode).send({ detail: error.message });
    return;
  }
  request.log.error({ err: error }, "unhandled error");
  reply.code(500).send({ detail: "Internal Server Error" });
}
