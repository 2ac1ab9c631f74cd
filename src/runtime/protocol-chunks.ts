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
 * dropped, the first sight of a subgraph namespace is a `lifecycle: started`, and the parent's
 * `updates` of the node that ran it is followed by its `lifecycle: completed` (as LangGraph's own
 * lifecycle transformer does; a subgraph still open when the run ends gets the run's terminal
 * status from the reader, see src/protocol/log-events.ts).
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
  /** Every subgraph namespace announced (`|`-joined). */
  namespaces: Set<string>;
  /** The subgraphs started and not ended yet, by `|`-joined namespace, in the order they started. */
  open: Map<string, string[]>;
}

export const newProtocolChunkState = (): ProtocolChunkState => ({ interrupts: new Set(), namespaces: new Set(), open: new Map() });

const keyOf = (namespace: string[]) => namespace.join("|");
const graphNameOf = (namespace: string[]) => namespace[namespace.length - 1]!.split(":")[0]!;

/** A subgraph's lifecycle record. */
const subgraphLifecycle = (namespace: string[], event: string): ProtocolRecord => ({
  method: "lifecycle",
  namespace,
  data: { event, graph_name: graphNameOf(namespace) },
});

/** Follows the lifecycle records of a run: which subgraphs are open. */
export function trackLifecycle(state: ProtocolChunkState, record: ProtocolRecord): void {
  if (record.method !== "lifecycle" || record.namespace.length === 0) return;
  const event = (record.data as { event?: unknown }).event;
  if (event === "started") state.open.set(keyOf(record.namespace), record.namespace);
  else state.open.delete(keyOf(record.namespace));
}

/** The terminal lifecycle records of the open subgraphs under `parent` (all of them for `[]`), deepest first; they are closed. */
export function closeSubgraphs(state: ProtocolChunkState, parent: string[], event: string): ProtocolRecord[] {
  const under = [...state.open.values()].filter((ns) => ns.length > parent.length && parent.every((segment, i) => ns[i] === segment));
  under.sort((a, b) => b.length - a.length);
  return under.map((ns) => {
    const record = subgraphLifecycle(ns, event);
    trackLifecycle(state, record);
    return record;
  });
}

/** After the parent's `updates` of `node`: the subgraph that node ran (`node` or `node:<task>` one level down) has completed. */
function completedBy(state: ProtocolChunkState, parent: string[], node: string): ProtocolRecord[] {
  if (node.startsWith("__")) return [];
  const child = [...state.open.values()].find((ns) => {
    if (ns.length !== parent.length + 1 || !parent.every((segment, i) => ns[i] === segment)) return false;
    const last = ns[ns.length - 1]!;
    return last === node || last.startsWith(`${node}:`);
  });
  if (!child) return [];
  // Whatever the subgraph left open below it ended with it.
  const below = closeSubgraphs(state, child, "completed");
  const record = subgraphLifecycle(child, "completed");
  trackLifecycle(state, record);
  return [...below, record];
}

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
    const started = subgraphLifecycle(prefix, "started");
    trackLifecycle(state, started);
    out.push(started);
  }
  if ((mode === "values" || mode === "updates") && isRecord(payload) && "__interrupt__" in payload) {
    out.push(...newInterruptRecords(state, namespace, payload));
    const { __interrupt__: _, ...rest } = payload;
    // An interrupt-only chunk carries no state; a values chunk with state keeps it without the interrupts.
    if (mode === "updates" || Object.keys(rest).length === 0) return out;
    payload = rest;
  }
  for (const event of convertToProtocolEvent({ namespace, mode: mode as never, payload, seq: 0 } as never) as {
    method: string;
    params: { namespace: string[]; node?: string; data: unknown };
  }[]) {
    const record: ProtocolRecord = { method: event.method, namespace: event.params.namespace, data: toWire(event.params.data) };
    if (typeof event.params.node === "string") record.node = event.params.node;
    out.push(record);
    if (record.method === "updates" && record.node !== undefined) out.push(...completedBy(state, record.namespace, record.node));
  }
  return out;
}
