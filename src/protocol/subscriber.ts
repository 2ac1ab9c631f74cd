/**
 * One subscription's delivery: the thread's feed from the log, filtered, handed to `send` in
 * order (awaiting it, so a slow client slows its own feed and nothing piles up in memory). Custom
 * auth's `threads:read` runs once the thread exists, before its first event is sent.
 */
import type { EventStore } from "../eventstore/types.js";
import { matchesFilter, type EventFilter, type ProtocolEvent } from "./log-events.js";
import { threadFeed } from "./thread-feed.js";

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
  /** Without `since`: the run to start at (see threadFeed). */
  fromRun?: string,
): Subscriber {
  const controller = new AbortController();
  const done = (async () => {
    let authorized = false;
    for await (const event of threadFeed(store, threadId, filter.since, controller.signal, fromRun)) {
      if (!matchesFilter(filter, event)) continue;
      if (!authorized) {
        await authorize();
        authorized = true;
      }
      if (controller.signal.aborted) return;
      // Awaited only when the client is slow (a promise and a turn fewer per event otherwise).
      const sent = send(event);
      if (sent) await sent;
    }
  })();
  return { stop: () => controller.abort(), done };
}
