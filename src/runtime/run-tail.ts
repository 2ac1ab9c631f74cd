/**
 * A run's own stream read from the log as it is written: what every reader that follows a run
 * (an SSE stream, an A2A task's events, the protocol's thread feed) shares.
 */
import type { EventStore, RecordedEvent } from "../eventstore/types.js";
import { isLargeValueMarker, resolveLarge } from "../eventstore/large-values.js";
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
