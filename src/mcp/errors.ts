/**
 * MCP's protocol errors (JSON-RPC codes), and the one place where application errors become
 * them. A tool's own failure is not one of these: `tools/call` answers it with `isError: true`.
 */
import { AuthError } from "../app/auth/engine.js";
import { DomainError, refusalOf } from "../domain/errors.js";
import { RpcErrorCode, type RpcError } from "../util/jsonrpc.js";

export class McpError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
    this.name = "McpError";
  }

  get rpc(): RpcError {
    return { code: this.code, message: this.message };
  }
}

export const invalidParams = (message: string) => new McpError(RpcErrorCode.InvalidParams, message);
export const methodNotFound = (method: string) => new McpError(RpcErrorCode.MethodNotFound, `Method not found: ${method}`);

/** The detail of the application's answer to the request (not a fault of the server); undefined for any other error. */
export const applicationErrorDetail = (error: unknown): string | undefined => (error instanceof AuthError ? error.detail : refusalOf(error)?.detail);

export function toMcpError(error: unknown): McpError {
  if (error instanceof McpError) return error;
  error = refusalOf(error) ?? error;
  // Custom auth refused (its handler's status and message), or the request names what is not there.
  if (error instanceof AuthError)
    return new McpError(error.status === 401 || error.status === 403 ? RpcErrorCode.InvalidRequest : RpcErrorCode.InvalidParams, error.detail);
  if (error instanceof DomainError) return invalidParams(error.detail);
  return new McpError(RpcErrorCode.Internal, "Internal error");
}
