import { AsyncLocalStorage } from "node:async_hooks";
import type { EventData, EventStore } from "../eventstore/types.js";
import { attributed } from "./attribution.js";

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

export interface AppendObserver {
  /** Called after every append with its duration in seconds and whether it succeeded (metrics). */
  (seconds: number, ok: boolean): void;
}

/**
 * Wraps a store so that every append is attributed (actor, request, causation and correlation ids
 * in each event's metadata, see attribution.ts) and, while serving a request, records its position
 * in the request's context.
 */
export function recordingPositions(store: EventStore, observe?: AppendObserver): EventStore {
  return {
    kind: store.kind,
    async append(stream, events, expected, options) {
      const context = storage.getStore();
      const stamped: EventData[] = events.map((e) => attributed(stream, e, context));
      const started = observe ? process.hrtime.bigint() : 0n;
      let ok = false;
      try {
        const result = await store.append(stream, stamped, expected, options);
        ok = true;
        if (context && (context.lastPosition === undefined || result.position > context.lastPosition)) context.lastPosition = result.position;
        return result;
      } finally {
        observe?.(Number(process.hrtime.bigint() - started) / 1e9, ok);
      }
    },
    readStream: (stream, options) => store.readStream(stream, options),
    readAll: (options) => store.readAll(options),
    headPosition: () => store.headPosition(),
    subscribeToStream: (stream, options) => store.subscribeToStream(stream, options),
    subscribeToAll: (options) => store.subscribeToAll(options),
    purgeStreams: (streams) => store.purgeStreams(streams),
    close: () => store.close(),
  };
}
