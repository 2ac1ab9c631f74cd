/**
 * Custom auth at the HTTP edge: authenticates every non-public request with the configured
 * `Auth` (after the API key check, after CORS preflights are answered) and gives routes the
 * request's `Caller`, which the application services authorize.
 */
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { AuthHandlers } from "../app/auth/handlers.js";
import { authenticate, type AuthContext } from "../app/auth/engine.js";
import type { Caller } from "../app/auth/caller.js";
import { isPublicRequest } from "./public-paths.js";
import { requestUrl } from "./request-target.js";

declare module "fastify" {
  interface FastifyRequest {
    /** The authenticated user and permissions; undefined without custom auth (or on public routes). */
    auth: AuthContext | undefined;
  }
  interface FastifyInstance {
    /** The configured Auth's handlers; undefined without custom auth. */
    authHandlers: AuthHandlers | undefined;
  }
}

/** The request as the Fetch API's `Request` (method, absolute URL of the checked target, headers; no body). */
export function toWebRequest(request: FastifyRequest): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(request.headers)) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) headers.append(name, v);
  }
  return new Request(requestUrl(request), { method: request.method, headers });
}

/** Decorates the app; with handlers, every non-public request is authenticated in onRequest. */
export function installAuth(app: FastifyInstance, handlers: AuthHandlers | undefined): void {
  app.decorate("authHandlers", handlers);
  app.decorateRequest("auth", undefined);
  if (!handlers) return;
  app.addHook("onRequest", async (request) => {
    if (isPublicRequest(request)) return;
    request.auth = await authenticate(handlers, toWebRequest(request), (error) => request.log.warn({ err: error }, "authentication failed"));
  });
}

/** Who asks, for the application services: the configured handlers and this request's user. */
export function callerOf(request: FastifyRequest): Caller {
  return { handlers: request.server.authHandlers, auth: request.auth };
}

/**
 * Who asks on a public path whose answer still depends on the caller (an agent card under custom
 * auth): the hook skipped authentication there, so it runs here, on the same checked URL; what the
 * handler refuses (no or bad credentials: its status and headers) is thrown as on any other route.
 */
export async function authenticatedCallerOf(request: FastifyRequest): Promise<Caller> {
  const caller = callerOf(request);
  if (caller.handlers === undefined || caller.auth !== undefined) return caller;
  const auth = await authenticate(caller.handlers, toWebRequest(request), (error) => request.log.warn({ err: error }, "authentication failed"));
  return { handlers: caller.handlers, auth };
}
