import Fastify, { LogController, type FastifyInstance, type FastifyPluginAsync } from "fastify";
import { useZodCompilers, zodSchemaController } from "./zod-compilers.js";
import { errorHandler } from "./errors.js";
import { requireApiKey } from "./api-key.js";
import fastifyCors from "@fastify/cors";
import { API_METHODS, corsOptions, type CorsConfig } from "./cors.js";
import { installAuth } from "./auth.js";
import type { AuthHandlers } from "../app/auth/handlers.js";
import { lazyApiDocs } from "./api-docs.js";
import { echoRequestId, requestIdOf } from "./actor.js";
import { mountCustomApp, type FetchApp } from "./custom-app.js";
import { normalizeMountPrefix } from "./mount-prefix.js";
import { forgiveEmptyBodies } from "./forgiving-body.js";
import { refuseBadTargets, requestTargetRewrite } from "./request-target.js";
import type { Socket } from "node:net";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Duplex } from "node:stream";

export interface HttpAppOptions {
  bodyLimit: number;
  apiKey: string | undefined;
  logLevel: string;
  /** `http.cors` of langgraph.json; absent = the official server's open policy. */
  cors?: CorsConfig;
  /** The configured Auth's handlers (`auth.path`); absent = no custom auth. */
  auth?: AuthHandlers;
  /** Resource plugins, each registering its routes with their zod schemas. */
  routes: FastifyPluginAsync[];
  /** Cross-cutting hooks added to the root app before any route (they apply to every route). */
  hooks?: ((app: FastifyInstance) => void)[];
  /** `http.app`: offered every request before the built-in routes (after CORS, API key, auth). */
  customApp?: FetchApp;
  /** `http.mount_prefix`: every route is served under it; other paths answer 404. */
  mountPrefix?: string;
}

/**
 * How long a client may take to send a request: its headers, then the whole request (body
 * included; a body the size of the body limit over a slow link must fit). Node checks the
 * connections in progress every `checkEveryMs`, so a timeout fires at most that much late.
 */
export const RECEIVE_TIMEOUTS = { headersMs: 30_000, requestMs: 300_000, checkEveryMs: 1_000 };

/** An answer written on the socket itself (no request object exists), after which it closes. */
function socketAnswer(status: number, reason: string, detail: string, extra = ""): string {
  const body = JSON.stringify({ detail });
  return `HTTP/1.1 ${status} ${reason}\r\n${extra}Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`;
}

/**
 * A request node's parser refused or timed out (malformed, headers too large, not received in
 * time): a `{"detail"}` answer, then the connection closes (the rest of what the client sent
 * cannot be framed). As node's own handler does, nothing is written when a response on this
 * connection has begun (a GET whose declared body never came, answered with a stream): the
 * answer would land inside that response.
 */
function answerClientError(error: Error & { code?: string }, socket: Socket): void {
  if (error.code === "ECONNRESET" || socket.destroyed) return;
  const [status, reason, detail] =
    error.code === "ERR_HTTP_REQUEST_TIMEOUT"
      ? [408, "Request Timeout", "The request was not received in time"]
      : error.code === "HPE_HEADER_OVERFLOW"
        ? [431, "Request Header Fields Too Large", "The request headers are too large"]
        : [400, "Bad Request", `Malformed HTTP request${error.code ? ` (${error.code})` : ""}`];
  const inFlight = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage;
  if (socket.writable && !inFlight?.headersSent) socket.write(socketAnswer(status, reason, detail));
  socket.destroy(error);
}

/** CONNECT (a proxy's tunnel) is no request of this API; without a listener node would close the connection without a word. */
function answerConnect(_request: IncomingMessage, socket: Duplex): void {
  socket.end(socketAnswer(405, "Method Not Allowed", "CONNECT is not served", `Allow: ${API_METHODS.join(", ")}\r\n`));
}

/**
 * The request-target check relies on the router reading a path as it is written: `//ok` and
 * `/ok/` are not `/ok`, and `;` is part of a segment, as for the public-path check and Hono (these
 * are fastify's defaults, stated so that they stay; find-my-way's types omit the last one).
 */
const ROUTER_OPTIONS = { ignoreDuplicateSlashes: false, ignoreTrailingSlash: false, useSemicolonDelimiter: false };

/** The fastify app: JSON everywhere, zod-validated routes, `{"detail"}` errors, OpenAPI at /openapi.json. */
export async function buildHttpApp(options: HttpAppOptions): Promise<FastifyInstance> {
  const app = Fastify({
    bodyLimit: options.bodyLimit,
    logger: options.logLevel === "silent" ? false : { level: options.logLevel },
    // Receiving a request (headers, then the whole body) is bounded, so a client that stops
    // sending (a body shorter than its Content-Length, a chunked body never ended, headers never
    // ended) gets a 408 instead of holding a connection forever. Node counts these from the
    // request's first byte until it has been received whole, never during the response: SSE
    // streams and waits are not cut (no socket idle timeout, `connectionTimeout`, is set for
    // the same reason).
    requestTimeout: RECEIVE_TIMEOUTS.requestMs,
    http: { headersTimeout: RECEIVE_TIMEOUTS.headersMs, connectionsCheckingInterval: RECEIVE_TIMEOUTS.checkEveryMs },
    clientErrorHandler: answerClientError,
    // Closing the server also ends idle keep-alive connections so shutdown is prompt.
    forceCloseConnections: "idle",
    return503OnClosing: true,
    // Request ids: the client's X-Request-Id or a new one, echoed, in every log line and on every event appended.
    genReqId: requestIdOf,
    logController: new LogController({ requestIdLogLabel: "request_id" }),
    // Every request target is checked, and the mount prefix stripped, once, before routing: the
    // router, the public-path check, the API key, custom auth and the custom app see one path.
    ...requestTargetRewrite(normalizeMountPrefix(options.mountPrefix)),
    routerOptions: ROUTER_OPTIONS,
    schemaController: zodSchemaController,
  });
  app.server.on("connect", answerConnect);
  echoRequestId(app);
  useZodCompilers(app);
  app.setErrorHandler(errorHandler);
  app.setNotFoundHandler((request, reply) => {
    reply.code(404).send({ detail: `Not Found: ${request.method} ${request.originalUrl.split("?")[0]}` });
  });
  // JSON and text/plain (the official JS server reads it as JSON); an empty body is no body, no body is {}.
  forgiveEmptyBodies(app);
  // A WebSocket upgrade answered with an HTTP response instead of a socket (a route that is no
  // WebSocket, a 404, a refused key or token): the connection left the HTTP server at the upgrade, so
  // nothing else closes it (it would stay open, unauthenticated, and hold the server's shutdown).
  app.addHook("onResponse", async (request) => {
    if ((request.raw as { upgrade?: boolean }).upgrade === true) request.raw.socket.destroy();
  });

  // Order of the onRequest hooks: CORS (answers preflights, adds its headers to every later
  // response), then the refusal of bad request targets, then the API key (cheap, constant), then
  // custom authentication. CORS reads no path, so a refused target's 400 is readable by a browser.
  await app.register(fastifyCors, corsOptions(options.cors));
  refuseBadTargets(app);
  if (options.apiKey) requireApiKey(app, options.apiKey);
  installAuth(app, options.auth);
  for (const hook of options.hooks ?? []) hook(app);
  if (options.customApp) mountCustomApp(app, options.customApp, { bodyLimit: options.bodyLimit });

  // OpenAPI at /openapi.json, Swagger UI at /docs: built from the routes registered below, on first request.
  lazyApiDocs(app);

  for (const routes of options.routes) await app.register(routes);
  return app;
}
