/**
 * The shape of an `Auth` instance from `@langchain/langgraph-sdk/auth`, seen from the server.
 * The instance is recognised by its `~handlerCache` (as the official server does), not by
 * `instanceof`: the user's file may load its own copy of the SDK.
 */
export type AuthenticateHandler = (request: Request) => unknown;
export type AuthorizeHandler = (event: {
  event: string;
  resource: string;
  action: string;
  value: unknown;
  permissions: string[];
  user: Record<string, unknown>;
}) => unknown;

export interface AuthHandlers {
  authenticate: AuthenticateHandler;
  /** Keyed by `resource:action`, `resource`, `*:action` or `*`. */
  callbacks: Record<string, AuthorizeHandler>;
}

/** The handlers of an `Auth` instance, or undefined when `value` is not one. */
export function authHandlersOf(value: unknown): { authenticate?: AuthenticateHandler; callbacks: Record<string, AuthorizeHandler> } | undefined {
  if (typeof value !== "object" || value === null || !("~handlerCache" in value)) return undefined;
  const cache = (value as { "~handlerCache": unknown })["~handlerCache"];
  if (typeof cache !== "object" || cache === null) return undefined;
  const { authenticate, callbacks } = cache as { authenticate?: unknown; callbacks?: unknown };
  return {
    authenticate: typeof authenticate === "function" ? (authenticate as AuthenticateHandler) : undefined,
    callbacks: typeof callbacks === "object" && callbacks !== null ? (callbacks as Record<string, AuthorizeHandler>) : {},
  };
}
