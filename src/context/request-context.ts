import { AsyncLocalStorage } from "node:async_hooks";

/**
 * Who is acting, and why, for everything an HTTP request or a run worker does (commands, appends).
 * Appends made outside any context (start-up, read-model listeners) are the system's.
 */
export interface RequestContext {
  /** Highest log position this request appended: returned in `X-Log-Position` so another process can wait for it. */
  lastPosition?: bigint;
  /** `X-Request-Id` (given or generated), echoed in the response and stamped on every event the request appends. */
  requestId?: string;
  /** The authenticated identity, `system`, or `worker:{owner}` (see actorOf). */
  actor?: string;
  /** The request or event that caused the appends (defaults to the request id). */
  causationId?: string;
  /** The run (or thread) the appends belong to, when the context knows it better than the stream name. */
  correlationId?: string;
}

const storage = new AsyncLocalStorage<RequestContext>();

/** Runs `fn` (and everything it awaits, and the timers it sets) inside a context. */
export function runInRequestContext<T>(context: RequestContext, fn: () => T): T {
  return storage.run(context, fn);
}

export function currentRequestContext(): RequestContext | undefined {
  return storage.getStore();
}

/** The `X-Log-Position` header of the current request, when it appended anything. */
export function logPositionHeaders(): Record<string, string> {
  const position = storage.getStore()?.lastPosition;
  return position === undefined ? {} : { "X-Log-Position": String(position) };
}
