/**
 * The JSON-RPC messages of one MCP POST (pure). A body is one message or, as MCP 2025-03-26
 * allows, a batch of them; each is a request (answered), a notification or a response (both
 * accepted with no answer: a stateless server sends no requests of its own), or invalid (answered
 * with its error). A body that is not JSON is -32700, an empty batch -32600, for the whole body.
 */
import { isPlainObject } from "../util/json.js";
import { isRpcId, parseJsonBody, RpcErrorCode, type RpcError, type RpcId } from "../util/jsonrpc.js";
import { describeViolation, findLimitViolation, REQUEST_LIMITS } from "../util/json-limits.js";

export type McpMessage =
  | { kind: "request"; id: string | number; method: string; params: Record<string, unknown> }
  | { kind: "notification"; method: string }
  | { kind: "response" }
  | { kind: "invalid"; id: RpcId; error: RpcError };

export interface McpBody {
  batch: boolean;
  messages: McpMessage[];
}

/** A body no message of which can be answered on its own: answered with this error, id null. */
export class BodyError extends Error {
  constructor(readonly error: RpcError) {
    super(error.message);
  }
}

const invalid = (id: RpcId, message: string, code: number = RpcErrorCode.InvalidRequest): McpMessage => ({ kind: "invalid", id, error: { code, message } });

/** One element of the body, classified. */
export function classify(value: unknown): McpMessage {
  if (!isPlainObject(value)) return invalid(null, "Invalid Request: a JSON-RPC message must be an object");
  const id = "id" in value && isRpcId(value.id) ? value.id : null;
  if (value.jsonrpc !== "2.0") return invalid(id, "Invalid Request: 'jsonrpc' must be exactly \"2.0\"");
  if (!("method" in value)) {
    // A client's answer to a server request: a stateless server sends none, so there is nothing to match.
    if ("id" in value && ("result" in value || "error" in value)) return { kind: "response" };
    return invalid(id, "Invalid Request: 'method' is required");
  }
  if (typeof value.method !== "string" || value.method === "") return invalid(id, "Invalid Request: 'method' must be a non-empty string");
  if (!("id" in value)) return { kind: "notification", method: value.method };
  // MCP: a request id is a string or an integer, never null.
  if (typeof value.id !== "string" && !(typeof value.id === "number" && Number.isInteger(value.id))) {
    return invalid(null, "Invalid Request: 'id' must be a string or an integer");
  }
  if (value.params !== undefined && !isPlainObject(value.params))
    return invalid(value.id, "Invalid params: 'params' must be an object", RpcErrorCode.InvalidParams);
  const tooDeep = findLimitViolation(value.params, REQUEST_LIMITS, "params");
  if (tooDeep) return invalid(value.id, `Invalid params: ${describeViolation(tooDeep)}`, RpcErrorCode.InvalidParams);
  return { kind: "request", id: value.id, method: value.method, params: (value.params as Record<string, unknown> | undefined) ?? {} };
}

/** Reads a raw POST body; throws BodyError when no message can be read from it. */
export function parseBody(raw: string | undefined): McpBody {
  let body: unknown;
  try {
    body = parseJsonBody(raw);
  } catch (error) {
    throw new BodyError({ code: RpcErrorCode.ParseError, message: `Parse error: ${(error as Error).message}` });
  }
  if (!Array.isArray(body)) return { batch: false, messages: [classify(body)] };
  if (body.length === 0) throw new BodyError({ code: RpcErrorCode.InvalidRequest, message: "Invalid Request: an empty batch" });
  return { batch: true, messages: body.map(classify) };
}
