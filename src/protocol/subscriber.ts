/**
 * One subscription's delivery: the thread's feed from the log, filtered, handed to `send` in
 * order (awaiting it, so a slow client slows its own feed and nothing piles up in memory). Custom
 * auth's `threads:read` runs once the thread exists, before its first event is sent.
 */
import type { EventStore } from "../eventstore/types.js";
import { matchesFilter, type EventFilter, type ProtocolEvent } from "./log-events.js";
import { feedThread } from "./thread-feed.js";

export interface Subscriber {
  /** Ends the delivery (the feed's subscriptions are closed). */
  stop(): void;
  /** Settles when the delivery ended: the thread was deleted, `stop` was called, or `send`/`authorize` failed (rejects then). */
  readonly done: Promise<void>;
}

export function subscribe(
  store: EventStore,
  threadId: string,
  filter: EventFilter,
  authorize: () => Promise<void>,
  send: (event: ProtocolEvent) => Promise<void> | void,
  /** Without `since`: the run to start at (see feedThread). */
  fromRun?: string,
): Subscriber {
  const controller = new AbortController();
  let authorized = false;
  const deliver = (event: ProtocolEvent): void | Promise<void> => {
    if (!matchesFilter(filter, event)) return;
    if (!authorized)
      return authorize().then(() => {
        authorized = true;
        if (!controller.signal.aborted) return send(event);
      });
    // The client's send is awaited (by the feed) only when it is slow: a promise and a turn fewer per event otherwise.
    return send(event);
  };
  const done = feedThread(store, threadId, filter.since, controller.signal, deliver, fromRun);
  return { stop: () => controller.abort(), done };
}
