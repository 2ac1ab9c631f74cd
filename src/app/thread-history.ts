import { WEBHOOK_STREAM_PREFIX } from "../domain/webhooks.js";
import type { EventStore, RecordedEvent } from "../eventstore/types.js";
import { purgedTypeOf } from "../eventstore/types.js";
import { isEvent } from "../domain/event-of.js";
import { threadStream } from "../domain/threads.js";
import { RUN_STREAM_PREFIX, runStream } from "../domain/runs.js";
import { CHECKPOINT_STREAM_PREFIX, CHECKPOINT_VALUE_STREAM_PREFIX, isOwnCheckpointValueStream } from "../domain/checkpoint-events.js";
import { RUN_ID_STREAM_PREFIXES, THREAD_ID_STREAM_PREFIXES } from "../domain/purge-scope.js";
import { isLargeJsonRef } from "../eventstore/chunked-append.js";
import { correlationOf } from "../context/attribution.js";

import { a2aPushStream, pushDeliveryKey } from "../domain/a2a-push.js";

/** Ids of the runs a thread's stream names, tombstones included (their metadata keeps the run id). */
export function runIdsOf(threadEvents: readonly RecordedEvent[]): string[] {
  const ids = new Set<string>();
  for (const e of threadEvents) {
    if (isEvent(e, "RunEnqueued")) ids.add(e.data.run.run_id);
    else if (purgedTypeOf(e) === "RunEnqueued" && typeof e.metadata.correlation_id === "string") {
      ids.add(e.metadata.correlation_id);
    }
  }
  return [...ids];
}

/**
 * Every event of a thread, from the log: its thread stream, its checkpoint stream and the streams
 * of its runs, merged in log order. Undefined when the thread never existed.
 */
export async function readThreadEvents(store: EventStore, id: string): Promise<RecordedEvent[] | undefined> {
  const thread = await store.readStream(threadStream(id));
  if (thread.length === 0) return undefined;
  const others = await Promise.all([
    store.readStream(`${CHECKPOINT_STREAM_PREFIX}${id}`),
    ...runIdsOf(thread).map((runId) => store.readStream(runStream(runId))),
  ]);
  return mergeByPosition([thread, ...others]);
}

function mergeByPosition(streams: RecordedEvent[][]): RecordedEvent[] {
  return streams.flat().sort((a, b) => (a.position < b.position ? -1 : a.position > b.position ? 1 : 0));
}

export interface HistoryFilter {
  /** Exclusive: events after this position. */
  after?: bigint;
  limit?: number;
  types?: readonly string[];
  runId?: string;
  /** Run output chunks (RunOutput) are left out unless asked for. */
  includeOutput: boolean;
}

/** The events of a history that pass the filter, in order (pure). */
export function filterHistory(events: readonly RecordedEvent[], f: HistoryFilter): RecordedEvent[] {
  const out: RecordedEvent[] = [];
  for (const e of events) {
    if (f.after !== undefined && e.position <= f.after) continue;
    if (!f.includeOutput && (e.type === "RunOutput" || purgedTypeOf(e) === "RunOutput")) continue;
    if (f.types && !f.types.includes(e.type)) continue;
    if (f.runId !== undefined && runOf(e) !== f.runId) continue;
    out.push(e);
    if (f.limit !== undefined && out.length >= f.limit) break;
  }
  return out;
}

/** The run an event belongs to: its attribution, else what its stream and data say. */
export function runOf(e: RecordedEvent): string | undefined {
  if (e.streamId.startsWith(RUN_STREAM_PREFIX)) return e.streamId.slice(RUN_STREAM_PREFIX.length);
  if (typeof e.metadata.correlation_id === "string") return e.metadata.correlation_id;
  return correlationOf(e.streamId, e.data, undefined);
}

/**
 * An event as /events shows it: positions and revisions as strings (bigints at the HTTP edge), and
 * the incarnation of the thread id it belongs to (see domain/thread-incarnations.ts).
 */
export function eventJson(e: RecordedEvent, incarnation: number) {
  return {
    position: String(e.position),
    stream: e.streamId,
    revision: String(e.revision),
    type: e.type,
    time: e.created.toISOString(),
    incarnation,
    metadata: e.metadata,
    data: e.data,
  };
}

/**
 * Every stream that holds the thread's content (what a purge removes), and the ids of the thread's
 * runs (what the read models drop once the purge is recorded). Values written beside the
 * runs, the checkpoint snapshots and the thread's own large checkpoint values
 * (`checkpoint-value-{thread_id}-{sha256}`) the checkpoint events reference are included; older
 * shared ones (`checkpoint-value-{sha256}`) are not, as other threads may reference them.
 */
export async function threadContent(store: EventStore, id: string): Promise<{ streams: string[]; runIds: string[] }> {
  const thread = await store.readStream(threadStream(id));
  const checkpoints = await store.readStream(`${CHECKPOINT_STREAM_PREFIX}${id}`);
  const streams = new Set<string>(THREAD_ID_STREAM_PREFIXES.map((prefix) => `${prefix}${id}`));
  const runIds = runIdsOf(thread);
  // The deliveries the A2A push configs of the thread's tasks (a task's id is a run id of this thread) caused: one
  // `webhook-a2a-{run}-{config}` stream per run end and config.
  const configIds = new Set<string>();
  for (const runId of runIds) {
    for (const e of await store.readStream(a2aPushStream(runId))) if (isEvent(e, "A2APushConfigSet")) configIds.add(e.data.config.id);
  }
  for (const runId of runIds) {
    for (const prefix of RUN_ID_STREAM_PREFIXES) streams.add(`${prefix}${runId}`);
    for (const configId of configIds) streams.add(`${WEBHOOK_STREAM_PREFIX}${pushDeliveryKey(runId, configId)}`);
  }
  for (const e of checkpoints) collectRefs(e.data, id, streams);
  return { streams: [...streams], runIds: [...runIds] };
}

/** The streams of the large values `value` refers to: the thread's own, not the older shared checkpoint values. */
function collectRefs(value: unknown, threadId: string, into: Set<string>): void {
  if (typeof value !== "object" || value === null) return;
  if (isLargeJsonRef(value)) {
    const stream = value.stream;
    if (!stream.startsWith(CHECKPOINT_VALUE_STREAM_PREFIX) || isOwnCheckpointValueStream(stream, threadId)) into.add(stream);
    return;
  }
  for (const item of Array.isArray(value) ? value : Object.values(value)) collectRefs(item, threadId, into);
}
