import Fastify, { LogController, type FastifyInstance, type FastifyPluginAsync } from "fastify";
import { useZodCompilers, zodSchemaController } from "./zod-compilers.js";
import { errorHandler } from "./errors.js";
import { requireApiKey } from "./api-key.js";
import fastifyCors from "@fastify/cors";
import { corsOptions, type CorsConfig } from "./cors.js";
import { installAuth } from "./auth.js";
import type { AuthHandlers } from "../app/auth/handlers.js";
import { lazyApiDocs } from "./api-docs.js";
import { echoRequestId, requestIdOf } from "./actor.js";
import { mountCustomApp, type FetchApp } from "./custom-app.js";
import { mountPrefixRewrite, normalizeMountPrefix } from "./mount-prefix.js";
import { forgiveEmptyBodies } from "./forgiving-body.js";


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

/** The fastify app: JSON everywhere, zod-validated routes, `{"detail"}` errors, OpenAPI at /openapi.json. */
export async function buildHttpApp(options: HttpAppOptions): Promise<FastifyInstance> {
  const app = Fastify({
    bodyLimit: options.bodyLimit,
    logger: options.logLevel === "silent" ? false : { level: options.logLevel },
    // Long-lived SSE streams and waits must not be cut by the server's own timeouts.
    requestTimeout: 0,
    // Closing the server also ends idle keep-alive connections so shutdown is prompt.
    forceCloseConnections: "idle",
    return503OnClosing: true,
    // Request ids: the client's X-Request-Id or a new one, echoed, in every log line and on every event appended.
    genReqId: requestIdOf,
    logController: new LogController({ requestIdLogLabel: "request_id" }),
    ...mountPrefixRewrite(normalizeMountPrefix(options.mountPrefix)),
    schemaController: zodSchemaController,
  });
  echoRequestId(app);
  useZodCompilers(app);
  app.setErrorHandler(errorHandler);
  app.setNotFoundHandler((request, reply) => {
    reply.code(404).send({ detail: `Not Found: ${request.method} ${request.originalUrl.split("?")[0]}` });
  });
  // JSON and text/plain (the official JS server reads it as JSON); an empty body is no body, no body is {}.
  forgiveEmptyBodies(app);

  // Order of the onRequest hooks: CORS (answers preflights, adds its headers to every later
  // response), then the API key (cheap, constant), then custom authentication.
  await app.register(fastifyCors, corsOptions(options.cors));
  if (options.apiKey) requireApiKey(app, options.apiKey);
  installAuth(app, options.auth);
  for (const hook of options.hooks ?? []) hook(app);
  if (options.customApp) mountCustomApp(app, options.customApp, { bodyLimit: options.bodyLimit });

  // OpenAPI at /openapi.json, Swagger UI at /docs: built from the routes registered below, on first request.
  lazyApiDocs(app);

  for (const routes of options.routes) await app.register(routes);
  return app;
}
