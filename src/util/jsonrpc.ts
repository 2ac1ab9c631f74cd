/**
 * JSON-RPC 2.0 (pure, ground floor): the envelope types, the response builders, the standard
 * error codes and the reading of a raw body, shared by the edges that speak it (A2A, MCP); each
 * edge validates the messages by its own protocol's rules.
 */

export type RpcId = string | number | null;

export interface RpcError {
  code: number;
  message: string;
  data?: unknown;
}

export type RpcResponse = { jsonrpc: "2.0"; id: RpcId; result: unknown } | { jsonrpc: "2.0"; id: RpcId; error: RpcError };

/** The codes JSON-RPC 2.0 reserves (§5.1). */
export const RpcErrorCode = {
  ParseError: -32700,
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  InvalidParams: -32602,
  Internal: -32603,
} as const;

export const success = (id: RpcId, result: unknown): RpcResponse => ({ jsonrpc: "2.0", id, result });
export const failure = (id: RpcId, error: RpcError): RpcResponse => ({ jsonrpc: "2.0", id, error });

/** Whether `id` is an id a request may carry (a string, a finite number, or null). */
export const isRpcId = (id: unknown): id is RpcId => typeof id === "string" || (typeof id === "number" && Number.isFinite(id)) || id === null;

/** The JSON of a raw body; an empty or unparsable one throws with the parser's reason (the caller's -32700). */
export function parseJsonBody(raw: string | undefined): unknown {
  if (raw === undefined || raw.trim() === "") throw new Error("empty body");
  return JSON.parse(raw);
}
