/**
 * Who asks, as the application sees it: the configured custom-auth handlers and the user they
 * authenticated. Every edge (REST, A2A, ...) builds one per request and passes it to the
 * application services, which run the `on()` handlers and apply their filters: the same rules
 * whatever edge a request came through.
 */
import { authorize as runAuthorize, type AuthAction, type AuthContext, type AuthorizeResult, type AuthResource } from "./engine.js";
import type { AuthHandlers } from "./handlers.js";

export interface Caller {
  /** The configured Auth's handlers; undefined without custom auth. */
  readonly handlers: AuthHandlers | undefined;
  /** The authenticated user and permissions; undefined without custom auth (or on public routes). */
  readonly auth: AuthContext | undefined;
}

/** The server itself (cron ticks, sweepers): no handler runs. */
export const SYSTEM_CALLER: Caller = { handlers: undefined, auth: undefined };

/** Whether custom auth may restrict what this caller sees (handlers are configured). */
export const isRestricted = (caller: Caller): boolean => caller.handlers !== undefined;

/**
 * Runs the auth handler for `resource:action` on `value` for the caller. Returns the (possibly
 * changed) value and the filters every read or write of the resource must honour; without custom
 * auth, the value unchanged and no filters. Throws AuthError (403 or the handler's status).
 */
export function authorize<V>(caller: Caller, resource: AuthResource, action: AuthAction, value: V): Promise<AuthorizeResult<V>> {
  return runAuthorize(caller.handlers, caller.auth, resource, action, value);
}
