/**
 * Log events of a run → thread streaming protocol (v2) events, and the filters of a subscription.
 * Pure: no I/O, no clock.
 *
 * Sequence numbers come from the log, so they hold across runs, restarts and processes: an event's
 * `seq` is its log position × 256 + its index among the protocol events that one log event yields
 * (a `RunOutput` holds one record; a `RunEnded` may yield pending `input.requested` events and the
 * terminal lifecycle). `event_id` is `seq` as a string; `timestamp` is the log event's time.
 * Positions increase along the log, so the runs of a thread, taken in order, give increasing seqs.
 */
import { matchesSubscription } from "@langchain/langgraph/stream";
import type { RecordedEvent } from "../eventstore/types.js";
import type { RunEnded } from "../domain/runs.js";
import { isEvent } from "../domain/event-of.js";
import {
  closeSubgraphs,
  newInterruptRecords,
  newProtocolChunkState,
  trackLifecycle,
  type ProtocolChunkState,
  type ProtocolRecord,
} from "../runtime/protocol-chunks.js";
import { PROTOCOL_OUTPUT } from "../runtime/stream-modes.js";

/** How many protocol events one log event may yield (the multiplier of its position in `seq`). */
export const EVENTS_PER_LOG_EVENT = 256;

export interface ProtocolEvent {
  type: "event";
  event_id: string;
  seq: number;
  method: string;
  params: { namespace: string[]; timestamp: number; node?: string; data: unknown };
}

/** What a subscription asks for: channels, namespace prefixes and depth below them, events after `since`. */
export interface EventFilter {
  channels: string[];
  namespaces?: string[][];
  depth?: number;
  since?: number;
}

/** Per run, while its log events are mapped: its graph's name and what the run announced so far. */
export interface RunMapState {
  graphName: string;
  chunks: ProtocolChunkState;
  /** The root lifecycle `running` was sent: at the run's enqueue (runStartOf), else at its first claim. */
  started: boolean;
}

export const newRunMapState = (graphName: string): RunMapState => ({ graphName, chunks: newProtocolChunkState(), started: false });

/** The seq of the `index`th protocol event of the log event at `position`. */
export const seqOf = (position: bigint, index: number): number => Number(position) * EVENTS_PER_LOG_EVENT + index;

/** A run status → the root lifecycle event the protocol names it with. */
export function lifecycleOf(status: RunEnded["status"]): "completed" | "failed" | "interrupted" {
  if (status === "success") return "completed";
  if (status === "interrupted" || status === "rollback") return "interrupted";
  return "failed";
}

/** One log event of `run-{id}` → its protocol events (none for takeovers, renewals, cancel requests, tombstones). */
export function protocolEventsOf(state: RunMapState, event: RecordedEvent): ProtocolEvent[] {
  const records: ProtocolRecord[] = [];
  if (isEvent(event, "RunClaimed")) {
    // The first claim starts a run not announced at its enqueue; a takeover after a crash continues it.
    if (event.data.attempt === 1 && !state.started) records.push(startRecord(state));
  } else if (isEvent(event, "RunOutput")) {
    const data = event.data;
    if (data.event === PROTOCOL_OUTPUT) {
      // A protocol-mode chunk: its data is one ProtocolRecord (the schema types any chunk's data as unknown).
      const record = data.data as ProtocolRecord;
      // Remember what the run announced, so its end does not announce it twice.
      if (record.method === "input.requested") {
        const id = (record.data as { interrupt_id?: unknown }).interrupt_id;
        if (typeof id === "string") state.chunks.interrupts.add(id);
      }
      trackLifecycle(state.chunks, record);
      records.push(record);
    }
  } else if (isEvent(event, "RunEnded")) {
    const ended = event.data;
    // Interrupts the chunks did not show (a run recorded without protocol events) are announced at its end.
    for (const list of Object.values(ended.interrupts ?? {})) records.push(...newInterruptRecords(state.chunks, [], list));
    // Subgraphs still open end with the run, with its status (the error is the root's to tell).
    records.push(...closeSubgraphs(state.chunks, [], lifecycleOf(ended.status)));
    const lifecycle: Record<string, unknown> = { event: lifecycleOf(ended.status), graph_name: state.graphName };
    if (ended.error && ended.status !== "interrupted") lifecycle.error = ended.error.message;
    records.push({ method: "lifecycle", namespace: [], data: lifecycle });
  }
  return eventsAt(event, records);
}

/**
 * The root lifecycle `running` of a run, at its RunEnqueued (on the thread's stream), as the official
 * server sends it when `run.start` creates the run: a client learns that its run was accepted without
 * waiting for a worker to take it. The thread feed sends it there only when every event of the run
 * before it came earlier in the log, so that seqs still increase along the feed.
 */
export function runStartOf(state: RunMapState, enqueued: { position: bigint; created: Date }): ProtocolEvent {
  return eventsAt(enqueued, [startRecord(state)])[0]!;
}

function startRecord(state: RunMapState): ProtocolRecord {
  state.started = true;
  return { method: "lifecycle", namespace: [], data: { event: "running", graph_name: state.graphName } };
}

/** The protocol events of the records one log event yields: seqs from its position, its time. */
function eventsAt(event: { position: bigint; created: Date }, records: ProtocolRecord[]): ProtocolEvent[] {
  const timestamp = event.created.getTime();
  return records.slice(0, EVENTS_PER_LOG_EVENT).map((record, index) => {
    const seq = seqOf(event.position, index);
    const params: ProtocolEvent["params"] = { namespace: record.namespace, timestamp, data: record.data };
    if (record.node !== undefined) params.node = record.node;
    return { type: "event", event_id: String(seq), seq, method: record.method, params };
  });
}

/** Whether a subscription receives an event: LangGraph's own matching (channels, `custom:<name>`, namespaces, depth, since). */
export function matchesFilter(filter: EventFilter, event: ProtocolEvent): boolean {
  return matchesSubscription(event as never, filter as never);
}
