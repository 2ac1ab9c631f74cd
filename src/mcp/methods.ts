/**
 * The MCP methods this server answers (stateless: every request stands alone, no session):
 * `initialize`, `ping`, `tools/list`, `tools/call`. Anything else is -32601; params that do not
 * fit are -32602.
 */
import * as z from "zod";
import type { Caller } from "../app/auth/caller.js";
import { failure, RpcErrorCode, success, type RpcResponse } from "../util/jsonrpc.js";
import { VERSION } from "../version.js";
import { invalidParams, methodNotFound, toMcpError } from "./errors.js";
import { negotiate } from "./protocol.js";
import type { McpTools } from "./tools.js";

type Headers = Record<string, string | string[] | undefined>;

export interface McpRequestContext {
  caller: Caller;
  headers: Headers;
  /** Aborted when the client goes away. */
  signal: AbortSignal;
  /** Logs a failure of the server's own (answered as -32603). */
  logError: (error: unknown) => void;
}

const InitializeParams = z.object({
  protocolVersion: z.string(),
  capabilities: z.record(z.string(), z.unknown()).optional(),
  clientInfo: z.unknown().optional(),
});
const ListParams = z.object({ cursor: z.string().optional() });
const CallParams = z.object({ name: z.string().min(1), arguments: z.record(z.string(), z.unknown()).optional() });

function parse<T>(schema: z.ZodType<T>, params: Record<string, unknown>): T {
  const parsed = schema.safeParse(params);
  if (!parsed.success) throw invalidParams(`Invalid params: ${z.prettifyError(parsed.error).replace(/\n/g, "; ")}`);
  return parsed.data;
}

export const SERVER_INFO = { name: "langgraph-agent-server", title: "LangGraph Agent Server", version: VERSION };

export function mcpMethods(tools: McpTools) {
  async function result(method: string, params: Record<string, unknown>, c: McpRequestContext): Promise<unknown> {
    switch (method) {
      case "initialize": {
        const p = parse(InitializeParams, params);
        return {
          protocolVersion: negotiate(p.protocolVersion),
          capabilities: { tools: { listChanged: false } },
          serverInfo: SERVER_INFO,
          instructions:
            "Each tool is an assistant of this LangGraph server; calling it runs the assistant once (a stateless run) and returns its output as JSON.",
        };
      }
      case "ping":
        return {};
      case "tools/list":
        return tools.list(c.caller, parse(ListParams, params).cursor);
      case "tools/call": {
        const p = parse(CallParams, params);
        return tools.call(c.caller, p.name, p.arguments ?? {}, c.headers, c.signal);
      }
      default:
        throw methodNotFound(method);
    }
  }

  /** The response to one request: its result, or its error as JSON-RPC says it. */
  return async function answer(id: string | number, method: string, params: Record<string, unknown>, c: McpRequestContext): Promise<RpcResponse> {
    try {
      return success(id, await result(method, params, c));
    } catch (error) {
      const e = toMcpError(error);
      if (e !== error && e.code === RpcErrorCode.Internal) c.logError(error);
      return failure(id, e.rpc);
    }
  };
}
