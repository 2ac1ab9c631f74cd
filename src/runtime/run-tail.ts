/**
 * A run's own stream read from the log as it is written: what every reader that follows a run
 * (an SSE stream, an A2A task's events, the protocol's thread feed) shares.
 */
import type { EventStore, RecordedEvent } from "../eventstore/types.js";
import { isLargeValueMarker, MARKER, resolveLarge } from "../eventstore/large-values.js";
import { runStream } from "../domain/runs.js";

/**
 * The events of `run-{id}` after `from` (exclusive), live, up to and including its RunEnded. Ends
 * early, its subscription closed, when `signal` aborts (a reader that left).
 */
export async function* tailRun(store: EventStore, runId: string, from: bigint | "start", signal: AbortSignal): AsyncGenerator<RecordedEvent> {
  const subscription = store.subscribeToStream(runStream(runId), { fromRevision: from });
  const stop = () => void subscription.close();
  signal.addEventListener("abort", stop, { once: true });
  try {
    for await (const item of subscription) {
      if (signal.aborted) return;
      if (item.kind !== "event") continue;
      yield item.event;
      if (item.event.type === "RunEnded") return;
    }
  } finally {
    signal.removeEventListener("abort", stop);
    await subscription.close();
  }
}

/** A run output's chunk: read back when it was too large for one event and written beside the run (see RunStreamWriter). */
export async function chunkOf(store: EventStore, output: { data: unknown }): Promise<unknown> {
  return isLargeValueMarker(output.data) ? await resolveLarge(store, output.data) : output.data;
}

const OUTPUT_TEXT_START = '{"event":"';
const DATA_KEY = '","data":';
/** Where a large chunk's reference lies, it names this key (see isLargeValueMarker): such text is parsed and resolved. */
const LARGE_MARKER_KEY = JSON.stringify(MARKER);

/**
 * A RunOutput's stored JSON text `{"event":"<name>","data":<data>}` taken apart without parsing it: the name,
 * and the text of its data, which JSON.stringify of the parsed data would give again. Undefined for text of
 * another shape (a name with escapes, keys in another order, no data) or data that may hold a large chunk's
 * reference; the caller parses those. RunOutput data has exactly these two keys (its schema is strict).
 */
export function splitOutputText(text: string): { event: string; dataText: string } | undefined {
  if (!text.startsWith(OUTPUT_TEXT_START) || !text.endsWith("}")) return undefined;
  const nameEnd = text.indexOf(DATA_KEY, OUTPUT_TEXT_START.length);
  if (nameEnd < 0) return undefined;
  const event = text.slice(OUTPUT_TEXT_START.length, nameEnd);
  if (event.includes("\\") || event.includes('"')) return undefined;
  const dataText = text.slice(nameEnd + DATA_KEY.length, -1);
  if (dataText.length === 0 || dataText.includes(LARGE_MARKER_KEY)) return undefined;
  return { event, dataText };
}
