import { currentRequestContext } from "../context/request-context.js";
import { attributed } from "../context/attribution.js";
import type { EventData, EventStore } from "./types.js";
import { refused, withAppend } from "./forwarding.js";

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
  // Not an async function: one promise per append (the store's own, then one `then`), not three.
  return withAppend(store, (stream, events, expected, options) => {
    const context = currentRequestContext();
    let stamped: EventData[];
    try {
      stamped = events.map((e) => attributed(stream, e, context));
    } catch (error) {
      return refused(options, error);
    }
    const started = observe ? process.hrtime.bigint() : 0n;
    const seconds = () => Number(process.hrtime.bigint() - started) / 1e9;
    let appended: ReturnType<EventStore["append"]>;
    try {
      appended = store.append(stream, stamped, expected, options);
    } catch (error) {
      observe?.(seconds(), false);
      return refused(options, error);
    }
    return appended.then(
      (result) => {
        if (context && (context.lastPosition === undefined || result.position > context.lastPosition)) context.lastPosition = result.position;
        observe?.(seconds(), true);
        return result;
      },
      (error: unknown) => {
        observe?.(seconds(), false);
        throw error;
      },
    );
  });
}
