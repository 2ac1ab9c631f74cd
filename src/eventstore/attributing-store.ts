import { currentRequestContext } from "../context/request-context.js";
import { attributed } from "../context/attribution.js";
import type { EventData, EventStore } from "./types.js";
import { withAppend } from "./forwarding.js";

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
  return withAppend(store, async (stream, events, expected, options) => {
    const context = currentRequestContext();
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
  });
}
