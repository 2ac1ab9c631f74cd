import { AsyncLocalStorage } from "node:async_hooks";
import type { EventStore } from "../eventstore/types.js";

/** What one HTTP request carries through everything it calls (commands, appends). */
export interface RequestContext {
  /** Highest log position this request appended: returned in `X-Log-Position` so another process can wait for it. */
  lastPosition?: bigint;
}

const storage = new AsyncLocalStorage<RequestContext>();

/** Runs `fn` (and everything it awaits) inside a request's context. */
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

/** Wraps a store so that every append made while serving a request records its position in the request's context. */
export function recordingPositions(store: EventStore): EventStore {
  return {
    kind: store.kind,
    async append(stream, events, expected) {
      const result = await store.append(stream, events, expected);
      const context = storage.getStore();
      if (context && (context.lastPosition === undefined || result.position > context.lastPosition)) context.lastPosition = result.position;
      return result;
    },
    readStream: (stream, options) => store.readStream(stream, options),
    readAll: (options) => store.readAll(options),
    headPosition: () => store.headPosition(),
    subscribeToStream: (stream, options) => store.subscribeToStream(stream, options),
    subscribeToAll: (options) => store.subscribeToAll(options),
    close: () => store.close(),
  };
}
