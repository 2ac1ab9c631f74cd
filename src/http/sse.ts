import { SseWriter } from "../util/sse-writer.js";

export { SseWriter, HEARTBEAT_MS } from "../util/sse-writer.js";
import type { EventStore } from "../eventstore/types.js";
import { runStream } from "../domain/runs.js";
import { HttpError } from "./errors.js";
import { isLargeValueMarker, resolveLarge } from "../eventstore/large-values.js";

/**
 * The PY join filter `?stream_mode=`: keeps events of the listed modes (with their subgraph
 * namespaces; `messages` covers `messages/*`, `messages-tuple` the `messages` events), plus
 * `metadata` and `error`, which every stream carries.
 */
export function streamModeFilter(modes: string[] | undefined): (event: string) => boolean {
  if (!modes || modes.length === 0) return () => true;
  const wanted = new Set(modes.map((m) => (m === "messages-tuple" ? "messages" : m)));
  return (event) => {
    const base = event.split("|")[0];
    if (base === "metadata" || base === "error" || wanted.has(base)) return true;
    return wanted.has("messages") && base.startsWith("messages/");
  };
}

/**
 * A run's SSE ids count its outputs from 0, as the official server's do: the first event of every
 * `run-{id}` that streams anything is the worker's claim (revision 0), appended together with the
 * `metadata` output (revision 1, id 0). So an id is its event's revision minus one, and any id maps
 * back to one revision: `Last-Event-ID` resumes exactly after it, even after a restart.
 */
const RUN_SSE_ID_OFFSET = 1n;

/** The SSE id of the run-stream event at `revision`. */
export const runSseId = (revision: bigint): bigint => revision - RUN_SSE_ID_OFFSET;

/**
 * `Last-Event-ID` → exclusive start revision of `run-{id}`: absent or `-1` = from the start;
 * otherwise the id of the last event the client saw.
 */
export function parseLastEventId(header: string | string[] | undefined): bigint | "start" {
  const value = Array.isArray(header) ? header[header.length - 1] : header;
  if (value === undefined || value.trim() === "" || value.trim() === "-1" || value.trim() === "-") return "start";
  if (!/^\d+$/.test(value.trim())) throw new HttpError(422, `Last-Event-ID: must be an event id (a non-negative integer) or -1, got "${value}"`);
  return BigInt(value.trim()) + RUN_SSE_ID_OFFSET;
}

/**
 * Tails `run-{id}` from the log: every RunOutput after `from` (exclusive) becomes an SSE event whose
 * id is `runSseId` of its stream revision; ends after RunEnded or when the client leaves. Never talks to a worker.
 */
export async function tailRunStream(
  store: EventStore,
  runId: string,
  from: bigint | "start",
  sse: SseWriter,
  /** Awaited after RunEnded before the response ends (the thread shows the outcome by then). */
  settled?: () => Promise<unknown>,
  /** Only events this accepts are sent (their ids stay those of their revisions). */
  accept: (event: string) => boolean = () => true,
): Promise<void> {
  const subscription = store.subscribeToStream(runStream(runId), { fromRevision: from });
  const stop = () => void subscription.close();
  sse.onClose(stop);
  sse.onEnd(stop);
  try {
    for await (const item of subscription) {
      if (sse.closed) break;
      if (item.kind !== "event") continue;
      const e = item.event;
      if (e.type === "RunOutput") {
        const d = e.data as { event: string; data: unknown };
        if (!accept(d.event)) continue;
        // A chunk too large for one event was written beside the run (see RunStreamWriter).
        const data = isLargeValueMarker(d.data) ? await resolveLarge(store, d.data) : d.data;
        const backpressure = sse.event(d.event, data, runSseId(e.revision));
        if (backpressure) await backpressure;
      } else if (e.type === "RunEnded") {
        break;
      }
    }
  } finally {
    await subscription.close();
  }
  if (!sse.closed) await settled?.();
}
