/**
 * The authentication and authorization engine of custom auth, independent of the HTTP framework:
 * it runs the handlers of an `Auth` instance and turns their answers (a user, filters, a
 * changed value, an HTTPException) into plain results or AuthErrors.
 */
import type { AuthHandlers, AuthorizeHandler } from "./handlers.js";
import { parseFilters, type AuthFilters } from "../../read-models/auth-filters.js";

/** Every resource and action the official server authorizes. */
export const AUTH_ACTIONS = {
  threads: ["create", "read", "update", "delete", "search", "create_run"],
  assistants: ["create", "read", "update", "delete", "search"],
  crons: ["create", "read", "update", "delete", "search"],
  store: ["put", "get", "search", "list_namespaces", "delete"],
  // This server's own: a user's erasure (POST /internal/erase, src/app/erase.ts).
  users: ["erase"],
} as const;
export type AuthResource = keyof typeof AUTH_ACTIONS;
export type AuthAction<R extends AuthResource = AuthResource> = (typeof AUTH_ACTIONS)[R][number];

/** The authenticated user, normalised as the official server does. */
export interface AuthUser {
  identity: string;
  permissions: string[];
  display_name: string;
  is_authenticated: boolean;
  [key: string]: unknown;
}

/** What `request.auth` holds after authentication. */
export interface AuthContext {
  user: AuthUser;
  permissions: string[];
}

export interface AuthorizeResult<V> {
  /** The value, possibly changed by the handler (what gets stored). */
  value: V;
  /** Restrictions on the metadata of what the request may read or write; undefined = none. */
  filters: AuthFilters | undefined;
}

/**
 * Authentication or authorization refused the request: a status of the handler's choosing (401 or
 * 403 by default) with its message and headers (e.g. `WWW-Authenticate`). Each edge gives it its
 * own form: the HTTP routes answer the status, A2A a JSON-RPC error.
 */
export class AuthError extends Error {
  constructor(
    readonly status: number,
    readonly detail: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(detail);
    this.name = "AuthError";
  }
}

const FRAMING_HEADERS = new Set(["content-type", "content-length", "transfer-encoding", "connection"]);

/** An `HTTPException` of the SDK (or any error shaped like one: another copy of the SDK). */
function asHttpException(error: unknown): { status: number; message: string; headers: Record<string, string> } | undefined {
  if (typeof error !== "object" || error === null || !("status" in error) || !("headers" in error)) return undefined;
  const { status, message, headers } = error as { status: unknown; message?: unknown; headers: unknown };
  if (typeof status !== "number" || !Number.isInteger(status) || status < 400 || status > 599) return undefined;
  const plain: Record<string, string> = {};
  const add = (k: string, v: unknown) => {
    // The body is ours (JSON `{"detail"}`): headers describing another body are dropped.
    if (v != null && !FRAMING_HEADERS.has(k.toLowerCase())) plain[k] = String(v);
  };
  if (headers instanceof Headers) headers.forEach((v, k) => add(k, v));
  else if (typeof headers === "object" && headers !== null) for (const [k, v] of Object.entries(headers)) add(k, v);
  return { status, message: typeof message === "string" && message ? message : `HTTP ${status}`, headers: plain };
}

const toAuthError = (e: { status: number; message: string; headers: Record<string, string> }) => new AuthError(e.status, e.message, e.headers);

/** A string identity, or an object with a string `identity` (and `permissions`, ...). */
export function normalizeUser(result: unknown): AuthContext {
  if (typeof result === "string" && result !== "") {
    return { user: { identity: result, permissions: [], display_name: result, is_authenticated: true }, permissions: [] };
  }
  if (typeof result === "object" && result !== null && typeof (result as { identity?: unknown }).identity === "string") {
    const r = result as Record<string, unknown> & { identity: string };
    const permissions = Array.isArray(r.permissions) ? r.permissions.filter((p): p is string => typeof p === "string") : [];
    return {
      user: {
        ...r,
        permissions,
        is_authenticated: typeof r.is_authenticated === "boolean" ? r.is_authenticated : true,
        display_name: typeof r.display_name === "string" ? r.display_name : r.identity,
      },
      permissions,
    };
  }
  throw new Error("authenticate() must return a string identity or an object with a string `identity`");
}

/**
 * Runs `authenticate(request)`. An HTTPException becomes its status, message and headers; any
 * other failure becomes a bare 401 (its message may hold secrets or token details).
 */
export async function authenticate(handlers: AuthHandlers, request: Request, log?: (error: unknown) => void): Promise<AuthContext> {
  let result: unknown;
  try {
    result = await handlers.authenticate(request);
  } catch (error) {
    const http = asHttpException(error);
    if (http) throw toAuthError(http);
    log?.(error);
    throw new AuthError(401, "Unauthorized");
  }
  try {
    return normalizeUser(result);
  } catch (error) {
    log?.(error);
    throw new AuthError(401, "Unauthorized");
  }
}

/** The most specific handler: `resource:action`, `resource`, `*:action`, then `*`. */
export function findHandler(handlers: AuthHandlers | undefined, resource: string, action: string): AuthorizeHandler | undefined {
  const callbacks = handlers?.callbacks;
  if (!callbacks) return undefined;
  for (const key of [`${resource}:${action}`, resource, `*:${action}`, "*"]) {
    if (Object.hasOwn(callbacks, key) && typeof callbacks[key] === "function") return callbacks[key];
  }
  return undefined;
}

/**
 * Runs the handler matching `resource:action` with `{user, permissions, action, resource, value}`.
 * No auth or no handler: the value passes unchanged, without filters. The handler may change
 * `value` in place, throw an HTTPException (its status), return false (403), or return filters.
 */
export async function authorize<V>(
  handlers: AuthHandlers | undefined,
  context: AuthContext | undefined,
  resource: AuthResource,
  action: AuthAction,
  value: V,
): Promise<AuthorizeResult<V>> {
  const handler = findHandler(handlers, resource, action);
  if (!handler || !context) return { value, filters: undefined };
  let result: unknown;
  try {
    result = await handler({ event: `${resource}:${action}`, resource, action, value, permissions: context.permissions, user: context.user });
  } catch (error) {
    const http = asHttpException(error);
    if (http) throw toAuthError(http);
    throw error;
  }
  if (result === undefined || result === null || result === true) return { value, filters: undefined };
  if (result === false) throw new AuthError(403, "Forbidden");
  try {
    const filters = parseFilters(result);
    return { value, filters: Object.keys(filters).length ? filters : undefined };
  } catch (error) {
    throw new Error(`Auth handler for ${resource}:${action} returned invalid filters: ${(error as Error).message}`);
  }
}
