/**
 * LangGraph stream chunks of a run that speaks the thread streaming protocol (v2) → the protocol
 * records the run appends to its log (`RunOutput {event: "protocol", data: record}`).
 *
 * A record is a protocol event without what only the reader knows: `seq`, `event_id` and
 * `timestamp` come from the log event that holds it (see src/protocol/log-events.ts). The graph
 * runs with `version: "v3"`, so its `messages` chunks are already protocol message events
 * (message-start, content-block-*, message-finish); LangGraph's own `convertToProtocolEvent` maps
 * every other mode. What LangGraph leaves to servers is done here: interrupts become
 * `input.requested` (once per interrupt id), a `values` chunk that only carries interrupts is
 * dropped, the first sight of a subgraph namespace is a `lifecycle: started`.
 */
import { convertToProtocolEvent } from "@langchain/langgraph/stream";
import { toWire } from "./wire.js";

export interface ProtocolRecord {
  method: string;
  namespace: string[];
  node?: string;
  data: unknown;
}

/** What the mapping remembers during one run: bounded by the run (its interrupts and subgraphs). */
export interface ProtocolChunkState {
  interrupts: Set<string>;
  namespaces: Set<string>;
}

export const newProtocolChunkState = (): ProtocolChunkState => ({ interrupts: new Set(), namespaces: new Set() });

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** `{__interrupt__: [{id, value}, ...]}` (or the list itself) → the `input.requested` data of each. */
export function interruptRequests(value: unknown): { interrupt_id: string; payload: unknown }[] {
  const list = Array.isArray(value) ? value : isRecord(value) && Array.isArray(value.__interrupt__) ? value.__interrupt__ : [];
  return list.flatMap((entry) => (isRecord(entry) && typeof entry.id === "string" ? [{ interrupt_id: entry.id, payload: entry.value ?? null }] : []));
}

/** The `input.requested` records of interrupts not announced yet in this run. */
export function newInterruptRecords(state: ProtocolChunkState, namespace: string[], value: unknown): ProtocolRecord[] {
  const out: ProtocolRecord[] = [];
  for (const request of interruptRequests(value)) {
    if (state.interrupts.has(request.interrupt_id)) continue;
    state.interrupts.add(request.interrupt_id);
    out.push({ method: "input.requested", namespace, data: request });
  }
  return out;
}

/** One `[namespace, mode, payload]` chunk of a v3 graph stream → the records to append. */
export function protocolRecordsOf(state: ProtocolChunkState, namespace: string[], mode: string, payload: unknown): ProtocolRecord[] {
  const out: ProtocolRecord[] = [];
  // A subgraph shows up: announce it (and its parents) once, as the official server's lifecycle transformer does.
  // Message events are namespaced by the node's task inside its graph: the graph is one segment up.
  const graphNamespace = mode === "messages" ? namespace.slice(0, -1) : namespace;
  for (let length = 1; length <= graphNamespace.length; length++) {
    const prefix = graphNamespace.slice(0, length);
    const key = prefix.join("|");
    if (state.namespaces.has(key)) continue;
    state.namespaces.add(key);
    const last = prefix[prefix.length - 1]!;
    out.push({ method: "lifecycle", namespace: prefix, data: { event: "started", graph_name: last.split(":")[0] } });
  }
  if ((mode === "values" || mode === "updates") && isRecord(payload) && "__interrupt__" in payload) {
    out.push(...newInterruptRecords(state, namespace, payload));
    const { __interrupt__: _, ...rest } = payload;
    // An interrupt-only chunk carries no state; a values chunk with state keeps it without the interrupts.
    if (mode === "updates" || Object.keys(rest).length === 0) return out;
    payload = rest;
  }
  for (const event of convertToProtocolEvent({ namespace, mode: mode as never, payload, seq: 0 } as never) as { method: string; params: { namespace: string[]; node?: string; data: unknown } }[]) {
    const record: ProtocolRecord = { method: event.method, namespace: event.params.namespace, data: toWire(event.params.data) };
    if (typeof event.params.node === "string") record.node = event.params.node;
    out.push(record);
  }
  return out;
}
