import type { EventStore, RecordedEvent } from "../../src/eventstore/types.js";

/**
 * Resolves with the first event of `stream` whose type is one of `types`, from the log (history,
 * then live): a test waits for what the server appends instead of polling or sleeping.
 */
export async function firstEventOf(store: EventStore, stream: string, types: string[]): Promise<RecordedEvent> {
  const sub = store.subscribeToStream(stream);
  try {
    for await (const item of sub) {
      if (item.kind === "event" && types.includes(item.event.type)) return item.event;
    }
  } finally {
    await sub.close();
  }
  throw new Error(`subscription to ${stream} ended before ${types.join(" / ")}`);
}
