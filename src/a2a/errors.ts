import { AuthError } from "../app/auth/engine.js";
import { DomainError, refusalOf } from "../domain/errors.js";
import { WrongExpectedVersionError } from "../eventstore/types.js";

/** JSON-RPC 2.0 and A2A error codes (A2A spec §8; v1.0 adds -32008 and -32009). */
export const ErrorCode = {
  ParseError: -32700,
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  InvalidParams: -32602,
  Internal: -32603,
  TaskNotFound: -32001,
  TaskNotCancelable: -32002,
  PushNotificationNotSupported: -32003,
  UnsupportedOperation: -32004,
  ContentTypeNotSupported: -32005,
  InvalidAgentResponse: -32006,
  ExtendedCardNotConfigured: -32007,
  ExtensionSupportRequired: -32008,
  VersionNotSupported: -32009,
} as const;
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/** v1.0 `google.rpc.ErrorInfo` reasons of the A2A codes. */
export const ERROR_REASONS: Partial<Record<ErrorCode, string>> = {
  [ErrorCode.TaskNotFound]: "TASK_NOT_FOUND",
  [ErrorCode.TaskNotCancelable]: "TASK_NOT_CANCELABLE",
  [ErrorCode.PushNotificationNotSupported]: "PUSH_NOTIFICATION_NOT_SUPPORTED",
  [ErrorCode.UnsupportedOperation]: "UNSUPPORTED_OPERATION",
  [ErrorCode.ContentTypeNotSupported]: "CONTENT_TYPE_NOT_SUPPORTED",
  [ErrorCode.InvalidAgentResponse]: "INVALID_AGENT_RESPONSE",
  [ErrorCode.ExtendedCardNotConfigured]: "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
  [ErrorCode.ExtensionSupportRequired]: "EXTENSION_SUPPORT_REQUIRED",
  [ErrorCode.VersionNotSupported]: "VERSION_NOT_SUPPORTED",
  [ErrorCode.InvalidParams]: "INVALID_PARAMS",
};

/** A failure with its JSON-RPC code; each codec turns it into its own `error` object. */
export class A2AError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
  ) {
    super(message);
    this.name = "A2AError";
  }
}

export const invalidParams = (message: string) => new A2AError(ErrorCode.InvalidParams, message);
export const taskNotFound = (taskId: string) => new A2AError(ErrorCode.TaskNotFound, `Task '${taskId}' not found`);
export const unsupported = (message: string) => new A2AError(ErrorCode.UnsupportedOperation, message);

/** What the failed application call was about: a 404 of a task lookup is -32001, of anything else -32602. */
export type Subject = "task" | "assistant" | "thread";

/**
 * The one place where application errors become JSON-RPC errors: the services raise DomainError
 * (the same ones the REST routes turn into statuses), and AuthError when custom auth refused.
 */
export function toA2AError(error: unknown, subject: Subject): A2AError {
  if (error instanceof A2AError) return error;
  error = refusalOf(error) ?? error;
  if (error instanceof DomainError) {
    if (error.kind === "not_found") {
      return subject === "task" ? new A2AError(ErrorCode.TaskNotFound, error.detail) : invalidParams(error.detail);
    }
    return invalidParams(error.detail);
  }
  if (error instanceof AuthError) {
    // A handler's HTTPException carries a status of its choosing: a 404 hides what it names.
    if (error.status === 404) {
      return subject === "task" ? new A2AError(ErrorCode.TaskNotFound, error.detail) : invalidParams(error.detail);
    }
    if (error.status === 409 || error.status === 422 || error.status === 400) return invalidParams(error.detail);
    // Custom auth refused the operation (the handler's status and message): the request is not allowed.
    if (error.status === 401 || error.status === 403) return new A2AError(ErrorCode.InvalidRequest, error.detail);
  }
  if (error instanceof WrongExpectedVersionError) {
    return invalidParams("the task was changed concurrently; retry the request");
  }
  return new A2AError(ErrorCode.Internal, "Internal error");
}
