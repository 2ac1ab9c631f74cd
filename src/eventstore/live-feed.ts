import type { EventFilter, EventStore, RecordedEvent, Subscription } from "./types.js";

/**
 * Live events of some streams (no history), fanned out to in-process listeners: e.g. other
 * processes' checkpoint appends for the checkpointer's cache on a shared store.
 */
export class LiveFeed {
  private readonly listeners = new Set<(event: RecordedEvent) => void>();
  private readonly subscription: Subscription;
  private readonly done: Promise<void>;

  /**
   * `name`: how health reports (/ok, /info, /metrics) call this feed's subscription. `onListenerError`:
   * told of an event a listener threw on (the feed goes on with the next one; by default it is logged).
   */
  constructor(store: EventStore, filter: EventFilter, name?: string, onListenerError?: (event: RecordedEvent, error: unknown) => void) {
    // The store re-subscribes after a drop from the last event delivered: no live event is lost.
    const subscription = store.subscribeToAll({ fromPosition: "end", filter, name });
    this.subscription = subscription;
    const failed =
      onListenerError ??
      ((event, error) => console.error(`live feed ${name ?? ""}: skipped ${event.type} at position ${event.position}: ${(error as Error).message}`));
    this.done = (async () => {
      try {
        for await (const item of subscription) {
          if (item.kind !== "event") continue;
          // One event a listener cannot handle must not end the feed for every later one.
          for (const listener of this.listeners) {
            try {
              listener(item.event);
            } catch (error) {
              failed(item.event, error);
            }
          }
        }
      } catch (error) {
        console.error(`live feed ended: ${(error as Error).message}`);
      }
    })();
  }

  onApplied(listener: (event: RecordedEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async close(): Promise<void> {
    await this.subscription.close();
    await this.done;
  }
}
