/**
 * Custom auth at the HTTP edge: authenticates every non-public request with the configured
 * `Auth` (after the API key check, after CORS preflights are answered) and gives routes
 * `authorize(request, resource, action, value)`.
 */
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { AuthHandlers } from "../app/auth/handlers.js";
import { authenticate, authorize as runAuthorize, type AuthAction, type AuthContext, type AuthResource, type AuthorizeResult } from "../app/auth/engine.js";
import { isPublicRequest } from "./public-paths.js";

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

/** The request as the Fetch API's `Request` (method, absolute URL, headers; no body). */
export function toWebRequest(request: FastifyRequest): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(request.headers)) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) headers.append(name, v);
  }
  const host = request.headers.host ?? `${request.hostname}`;
  return new Request(`${request.protocol}://${host}${request.url}`, { method: request.method, headers });
}

/** Decorates the app; with handlers, every non-public request is authenticated in onRequest. */
export function installAuth(app: FastifyInstance, handlers: AuthHandlers | undefined): void {
  app.decorate("authHandlers", handlers);
  app.decorateRequest("auth", undefined);
  if (!handlers) return;
  app.addHook("onRequest", async (request) => {
    if (isPublicRequest(request)) return;
    request.auth = await authenticate(handlers, toWebRequest(request), (error) =>
      request.log.warn({ err: error }, "authentication failed"),
    );
  });
}

/**
 * Runs the auth handler for `resource:action` on `value` for this request's user. Returns the
 * (possibly changed) value and the filters every read or write of the resource must honour;
 * without custom auth, the value unchanged and no filters. Throws HttpError (403 or the
 * handler's status).
 */
export function authorize<V>(request: FastifyRequest, resource: AuthResource, action: AuthAction, value: V): Promise<AuthorizeResult<V>> {
  return runAuthorize(request.server.authHandlers, request.auth, resource, action, value);
}
