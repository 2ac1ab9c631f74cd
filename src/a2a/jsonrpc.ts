/**
 * A2A's JSON-RPC 2.0 envelope (pure): request validation in the order the codes need (the
 * response builders are the shared ones of util/jsonrpc), and the protocol-version negotiation
 * (method name + `A2A-Version` header).
 */
import { A2AError, ErrorCode } from "./errors.js";
import { isPlainObject } from "../util/json.js";
import { isRpcId, parseJsonBody, type RpcId } from "../util/jsonrpc.js";
import { describeViolation, findLimitViolation, REQUEST_LIMITS } from "../util/json-limits.js";

export { failure, success, type RpcId, type RpcResponse } from "../util/jsonrpc.js";

export interface RpcRequest {
  id: RpcId;
  method: string;
  params: Record<string, unknown>;
}

/** A request that cannot be answered normally, with the id to echo (null when none could be read). */
export class EnvelopeError extends A2AError {
  constructor(
    code: ErrorCode,
    message: string,
    readonly id: RpcId,
  ) {
    super(code, message);
  }
}

/** Parses and validates a raw body; throws EnvelopeError with the id to echo. */
export function parseRequest(raw: string | undefined): RpcRequest {
  let body: unknown;
  try {
    body = parseJsonBody(raw);
  } catch (error) {
    throw new EnvelopeError(ErrorCode.ParseError, `Parse error: ${(error as Error).message}`, null);
  }
  if (Array.isArray(body)) throw new EnvelopeError(ErrorCode.InvalidRequest, "Invalid Request: batch requests are not supported", null);
  if (!isPlainObject(body)) throw new EnvelopeError(ErrorCode.InvalidRequest, "Invalid Request: the body must be a JSON-RPC request object", null);
  const id = body.id;
  const validId = isRpcId(id);
  if (!("id" in body)) throw new EnvelopeError(ErrorCode.InvalidRequest, "Invalid Request: 'id' is required (notifications are not supported)", null);
  if (!validId) throw new EnvelopeError(ErrorCode.InvalidRequest, "Invalid Request: 'id' must be a string, a number or null", null);
  if (body.jsonrpc !== "2.0") throw new EnvelopeError(ErrorCode.InvalidRequest, "Invalid Request: 'jsonrpc' must be exactly \"2.0\"", id);
  if (typeof body.method !== "string" || body.method === "") {
    throw new EnvelopeError(ErrorCode.InvalidRequest, "Invalid Request: 'method' must be a non-empty string", id);
  }
  if (body.params !== undefined && !isPlainObject(body.params)) {
    throw new EnvelopeError(ErrorCode.InvalidParams, "Invalid params: 'params' must be an object", id);
  }
  const tooDeep = findLimitViolation(body.params, REQUEST_LIMITS, "params");
  if (tooDeep) throw new EnvelopeError(ErrorCode.InvalidParams, `Invalid params: ${describeViolation(tooDeep)}`, id);
  return { id, method: body.method, params: (body.params as Record<string, unknown> | undefined) ?? {} };
}

export type ProtocolVersion = "0.3" | "1.0";

/**
 * The `A2A-Version` header: absent or empty means 0.3 (v1.0 spec); `0.3`, `0.3.x`, `1.0`, `1.0.x`
 * are served; anything else is -32009.
 */
export function headerVersion(header: string | string[] | undefined): ProtocolVersion | undefined {
  const value = (Array.isArray(header) ? header[header.length - 1] : header)?.trim();
  if (!value) return undefined;
  const m = /^(\d+)\.(\d+)(?:\.\d+)?$/.exec(value);
  if (m && m[1] === "0" && m[2] === "3") return "0.3";
  if (m && m[1] === "1" && m[2] === "0") return "1.0";
  throw new A2AError(ErrorCode.VersionNotSupported, `A2A-Version ${value} is not supported; this server speaks 0.3 and 1.0`);
}
