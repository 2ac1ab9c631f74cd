/**
 * The MCP edge: `POST /mcp`, MCP's Streamable HTTP transport in its stateless form with JSON
 * responses (no session id, no server-initiated stream). A body of notifications or responses
 * only is accepted with 202 and no body; requests are answered with `application/json` (one
 * response, or an array for a batch). `GET` (the server-to-client stream) and `DELETE` (ending a
 * session) answer 405: there is neither. The API key and custom auth apply as on every route.
 */
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import type { AppContext } from "../app/context.js";
import type { RunsService } from "../app/runs.js";
import type { Caller } from "../app/auth/caller.js";
import { AuthError } from "../app/auth/engine.js";
import { failure, RpcErrorCode, type RpcResponse } from "../util/jsonrpc.js";
import { BodyError, parseBody, type McpMessage } from "./envelope.js";
import { mcpMethods, type McpRequestContext } from "./methods.js";
import { headerVersion, SUPPORTED_VERSIONS } from "./protocol.js";
import { McpTools } from "./tools.js";

export interface McpRoutesOptions {
  /** Who asks (custom auth's handlers and user), as the server's authentication established it. */
  callerOf: (request: FastifyRequest) => Caller;
}

type Headers = Record<string, string | string[] | undefined>;

export function mcpRoutes(ctx: AppContext, runs: RunsService, options: McpRoutesOptions): FastifyPluginAsync {
  const answer = mcpMethods(new McpTools(ctx, runs));

  const refuse = (reply: FastifyReply, status: number, code: number, message: string) => reply.code(status).send(failure(null, { code, message }));

  async function post(req: FastifyRequest, reply: FastifyReply) {
    let body;
    try {
      body = parseBody(typeof req.body === "string" ? req.body : undefined);
    } catch (error) {
      if (!(error instanceof BodyError)) throw error;
      return reply.code(400).send(failure(null, error.error));
    }
    const requests = body.messages.filter((m): m is Extract<McpMessage, { kind: "request" }> => m.kind === "request");
    const initializing = requests.some((m) => m.method === "initialize");
    // After `initialize`, a client names the version it negotiated on every request (MCP 2025-06-18).
    if (!initializing && headerVersion(req.headers["mcp-protocol-version"]) === undefined) {
      return refuse(
        reply,
        400,
        RpcErrorCode.InvalidRequest,
        `Bad Request: unsupported MCP-Protocol-Version ${JSON.stringify(req.headers["mcp-protocol-version"])}; this server speaks ${SUPPORTED_VERSIONS.join(", ")}`,
      );
    }
    const invalid = body.messages.flatMap((m): RpcResponse[] => (m.kind === "invalid" ? [failure(m.id, m.error)] : []));
    // Notifications and responses need no answer: accepted, and nothing follows (no session to act on).
    if (requests.length === 0 && invalid.length === 0) return reply.code(202).send();
    const gone = new AbortController();
    reply.raw.on("close", () => {
      if (!reply.raw.writableEnded) gone.abort();
    });
    const c: McpRequestContext = {
      caller: options.callerOf(req),
      headers: req.headers as Headers,
      signal: gone.signal,
      logError: (err) => reply.log.error({ err }, "mcp request failed"),
    };
    const responses = [...invalid, ...(await Promise.all(requests.map((m) => answer(m.id, m.method, m.params, c))))];
    // A message that is not even a request (bad envelope) is a 400, as the transport asks; a request's own error is a 200.
    const status = !body.batch && invalid.length > 0 ? 400 : 200;
    return reply
      .code(status)
      .header("content-type", "application/json")
      .send(body.batch ? responses : responses[0]);
  }

  const notAllowed = async (_req: FastifyRequest, reply: FastifyReply) =>
    reply
      .code(405)
      .header("allow", "POST")
      .send(failure(null, { code: RpcErrorCode.InvalidRequest, message: "Method Not Allowed: this MCP server is stateless and answers POST only" }));

  /** In its own context, with the raw body, so bad JSON is -32700 and not a 422. */
  return async (app: FastifyInstance) => {
    app.removeAllContentTypeParsers();
    app.addContentTypeParser("*", { parseAs: "string" }, (_req, body, done) => done(null, body));
    app.setErrorHandler((error: Error & { statusCode?: number; code?: string }, _request, reply) => {
      // Authentication failures (the API key, custom auth) are answered as on every other route.
      if (error instanceof AuthError || error.statusCode === 401 || error.statusCode === 403) throw error;
      const tooLarge = error.code === "FST_ERR_CTP_BODY_TOO_LARGE";
      if (tooLarge || (error.statusCode !== undefined && error.statusCode < 500)) {
        return refuse(reply, tooLarge ? 413 : 400, RpcErrorCode.InvalidRequest, `Invalid Request: ${tooLarge ? "request body is too large" : error.message}`);
      }
      reply.log.error({ err: error }, "mcp request failed");
      return refuse(reply, 500, RpcErrorCode.Internal, "Internal error");
    });
    app.post("/mcp", { schema: { tags: ["mcp"] } }, post);
    app.get("/mcp", { schema: { tags: ["mcp"] } }, notAllowed);
    app.delete("/mcp", { schema: { tags: ["mcp"] } }, notAllowed);
  };
}
