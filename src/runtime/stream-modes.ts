/**
 * LangGraph stream chunks → SSE events (`{event, data}` with plain-JSON data), the way the official
 * servers name and shape them:
 *   values, updates, debug, custom, tasks, checkpoints → event = mode (`mode|ns…` for subgraphs)
 *   messages-tuple → event `messages`, data `[message, metadata]`
 *   messages       → `messages/metadata` (once per message id), `messages/partial` (accumulated
 *                    chunk), `messages/complete` (new complete messages seen in `values`)
 *   events         → raw streamEvents v2 objects
 * The modes a request may name are listed with the run request (domain/run-request.ts).
 */

import { STREAM_EVENTS_V3_MODES } from "@langchain/langgraph/stream";
import { newProtocolChunkState, protocolRecordsOf, type ProtocolChunkState } from "./protocol-chunks.js";
import { toWire } from "./wire.js";
import { dataWithText } from "../eventstore/json-text.js";
import { deepFreeze } from "../util/json.js";

export { toWire } from "./wire.js";

type LibMode = "values" | "updates" | "debug" | "messages" | "checkpoints" | "tasks" | "custom" | "tools";

/** The RunOutput event name of a protocol (v2) record. */
export const PROTOCOL_OUTPUT = "protocol";

export interface SseEvent {
  event: string;
  data: unknown;
}

/** Errors as the servers send them: `{error: <name>, message}`. */
export function serializeError(error: unknown): { error: string; message: string } {
  if (error instanceof Error) return { error: error.name, message: error.message };
  return { error: "Error", message: typeof error === "string" ? error : (JSON.stringify(error) ?? String(error)) };
}

function withoutInternals(config: unknown): unknown {
  if (!config || typeof config !== "object") return config;
  const { callbacks: _callbacks, ...rest } = config as Record<string, unknown>;
  const configurable = rest.configurable as Record<string, unknown> | undefined;
  if (configurable && typeof configurable === "object") {
    rest.configurable = Object.fromEntries(Object.entries(configurable).filter(([k]) => !k.startsWith("__")));
  }
  return rest;
}

/**
 * Metadata without LangGraph's and the server's internal keys (`__pregel_task_id`,
 * `__agent_server_defer_checkpoint_writes`, …): some LangGraph versions copy the run's whole
 * `configurable` into the metadata they hand out, and those keys are nobody's business outside.
 */
export function publicMetadata<T>(metadata: T): T {
  if (!metadata || typeof metadata !== "object" || Array.isArray(metadata)) return metadata;
  const keys = Object.keys(metadata);
  if (!keys.some((k) => k.startsWith("__"))) return metadata;
  return Object.fromEntries(keys.filter((k) => !k.startsWith("__")).map((k) => [k, (metadata as Record<string, unknown>)[k]])) as T;
}

/** A `messages` chunk `[message, metadata]` with its metadata made public. */
function messagesTuple(chunk: unknown): unknown {
  if (!Array.isArray(chunk) || chunk.length !== 2) return chunk;
  const metadata = publicMetadata(chunk[1]);
  return metadata === chunk[1] ? chunk : [chunk[0], metadata];
}

function checkpointOfConfig(config: unknown): unknown {
  const c = (config as { configurable?: Record<string, unknown> } | undefined)?.configurable;
  if (!c?.checkpoint_id) return null;
  return { thread_id: c.thread_id, checkpoint_ns: c.checkpoint_ns ?? "", checkpoint_id: c.checkpoint_id, checkpoint_map: c.checkpoint_map ?? null };
}

/** The debug/checkpoints payload with snake_case parent config and without callbacks or internal keys. */
function checkpointPayload(payload: Record<string, unknown>): Record<string, unknown> {
  const { parentConfig, ...rest } = payload;
  const parent = rest.parent_config ?? parentConfig;
  return {
    ...rest,
    ...(rest.metadata !== undefined ? { metadata: publicMetadata(rest.metadata) } : {}),
    config: withoutInternals(rest.config),
    parent_config: withoutInternals(parent) ?? null,
    checkpoint: checkpointOfConfig(rest.config),
    parent_checkpoint: checkpointOfConfig(parent),
  };
}

interface MessageLike {
  id?: string;
  concat?: (other: unknown) => MessageLike;
}

/** Maps the chunks of one run; keeps the per-run state (accumulated message chunks, seen ids). */
export class StreamModeMapper {
  readonly requested: ReadonlySet<string>;
  readonly subgraphs: boolean;
  /** Whether the run needs LangChain's streamEvents (slower) rather than graph.stream. */
  readonly needsEvents: boolean;
  /** Whether the run records protocol (v2) events: the graph then streams v3 chunks of every namespace. */
  readonly protocol: ProtocolChunkState | undefined;
  private readonly partial = new Map<string, MessageLike>();
  /**
   * A `messages-tuple` metadata's wire form and JSON text, by the metadata object LangGraph hands out with
   * every token of one model call: converted and serialised once per call, not once per token.
   */
  private readonly tupleMetadata = new WeakMap<object, { wire: unknown; text: string }>();
  private readonly completed = new Set<string>();
  /** Last root `values` chunk without `__interrupt__`: the run's result. */
  lastValues: unknown = undefined;
  /**
   * `lastValues` as the wire shows it, when it was emitted as a `values` event: the run's result
   * then needs no second conversion (on a long conversation, a copy of the whole state).
   */
  lastValuesWire: unknown = undefined;
  interrupted = false;
  /**
   * Whether the last root `values` chunk was an `__interrupt__` one: what both official servers'
   * /wait and /join answer. It is not when a task interrupted while another of its step wrote: LangGraph
   * then emits the state with those writes applied after the interrupt.
   */
  lastValuesInterrupt = false;

  constructor(modes: readonly string[], subgraphs: boolean) {
    this.requested = new Set(modes);
    this.subgraphs = subgraphs;
    this.protocol = this.requested.has("protocol") ? newProtocolChunkState() : undefined;
    this.needsEvents = !this.protocol && (this.requested.has("events") || this.requested.has("messages"));
  }

  /** Modes to ask LangGraph for: the requested ones, plus `values` (the result) and `messages` for the tuple mode. */
  libModes(): LibMode[] {
    const out = new Set<LibMode>(["values"]);
    if (this.protocol) for (const m of STREAM_EVENTS_V3_MODES) out.add(m as LibMode);
    for (const m of this.requested) {
      if (m === "messages-tuple") out.add("messages");
      else if (m === "updates" || m === "debug" || m === "checkpoints" || m === "tasks" || m === "custom") out.add(m);
    }
    return [...out];
  }

  private name(mode: string, ns: string[] | undefined): string {
    return this.subgraphs && ns && ns.length ? `${mode}|${ns.join("|")}` : mode;
  }

  /** One `graph.stream` chunk `[ns, mode, data]` → the SSE events to append. */
  fromChunk(ns: string[] | undefined, mode: string, chunk: unknown): SseEvent[] {
    const root = !ns || ns.length === 0;
    const out: SseEvent[] = [];
    if (this.protocol) {
      for (const record of protocolRecordsOf(this.protocol, ns ?? [], mode, chunk)) out.push({ event: PROTOCOL_OUTPUT, data: record });
      // The v3 stream has every namespace; the v1 modes keep theirs only when subgraphs were asked for.
      if (!root && !this.subgraphs) {
        return out;
      }
      // v3 message chunks are protocol events, not the v1 tuples.
      if (mode === "messages" || mode === "tools") return out;
    }
    if (mode === "values" && root) {
      this.lastValuesInterrupt = !!chunk && typeof chunk === "object" && "__interrupt__" in chunk;
      if (this.lastValuesInterrupt) this.interrupted = true;
      else {
        this.lastValues = chunk;
        this.lastValuesWire = undefined;
      }
    }
    if (mode === "updates" && root && chunk && typeof chunk === "object" && "__interrupt__" in chunk) this.interrupted = true;
    if (mode === "messages") {
      if (this.requested.has("messages-tuple")) out.push(this.messagesTupleEvent(this.name("messages", ns), chunk));
      return out;
    }
    if (this.requested.has(mode)) {
      let data: unknown = chunk;
      if (mode === "checkpoints" && chunk && typeof chunk === "object") data = checkpointPayload(chunk as Record<string, unknown>);
      if (mode === "debug" && chunk && typeof chunk === "object") {
        const d = chunk as { type?: string; payload?: Record<string, unknown> };
        if (d.type === "checkpoint" && d.payload) data = { ...d, payload: checkpointPayload(d.payload) };
      }
      const wire = toWire(data);
      if (mode === "values" && root && chunk === this.lastValues) this.lastValuesWire = wire;
      out.push({ event: this.name(mode, ns), data: wire });
    }
    if (mode === "values" && this.requested.has("messages") && (root || this.subgraphs)) out.push(...this.completeMessages(chunk));
    return out;
  }

  private completeMessages(chunk: unknown): SseEvent[] {
    if (!chunk || typeof chunk !== "object" || !("messages" in chunk)) return [];
    const raw = (chunk as { messages: unknown }).messages;
    const list = (Array.isArray(raw) ? raw : [raw]) as MessageLike[];
    const fresh = list.filter((m) => m && typeof m.id === "string" && !this.completed.has(m.id));
    for (const m of fresh) this.completed.add(m.id!);
    return fresh.length ? [{ event: "messages/complete", data: toWire(fresh) }] : [];
  }

  /**
   * A `messages-tuple` event: `[message, metadata]`, its JSON text made from the message's and the call's
   * metadata text (the metadata is most of a token event's bytes; see tupleMetadata).
   */
  private messagesTupleEvent(event: string, chunk: unknown): SseEvent {
    const metadata = Array.isArray(chunk) && chunk.length === 2 ? (chunk[1] as unknown) : undefined;
    if (typeof metadata !== "object" || metadata === null) return { event, data: toWire(messagesTuple(chunk)) };
    let known = this.tupleMetadata.get(metadata);
    if (!known) {
      // Shared by every token event of the call: frozen throughout, so their kept texts cannot go stale.
      const wire = deepFreeze(toWire(publicMetadata(metadata)));
      known = { wire, text: JSON.stringify(wire) };
      this.tupleMetadata.set(metadata, known);
    }
    const message = toWire((chunk as unknown[])[0]);
    const data = Object.freeze([message, known.wire]);
    return dataWithText({ event, data }, `{"event":${JSON.stringify(event)},"data":[${JSON.stringify(message)},${known.text}]}`);
  }

  /** One streamEvents v2 event (used when `events` or `messages` was requested). */
  fromStreamEvent(event: { event: string; run_id?: string; tags?: string[]; data?: { chunk?: unknown }; metadata?: unknown }, rootRunId: string): SseEvent[] {
    if (event.tags?.includes("langsmith:hidden")) return [];
    if (event.event === "on_chain_stream" && event.run_id === rootRunId) {
      const tuple = event.data?.chunk as unknown[];
      const [ns, mode, chunk] = (this.subgraphs ? tuple : [undefined, ...tuple]) as [string[] | undefined, string, unknown];
      return this.fromChunk(ns, mode, chunk);
    }
    const out: SseEvent[] = [];
    const metadata = publicMetadata(event.metadata);
    if (this.requested.has("events")) out.push({ event: "events", data: toWire(metadata === event.metadata ? event : { ...event, metadata }) });
    if (this.requested.has("messages") && event.event === "on_chat_model_stream" && !event.tags?.includes("nostream")) {
      const message = event.data?.chunk as MessageLike | undefined;
      if (message?.id) {
        const previous = this.partial.get(message.id);
        if (!previous) out.push({ event: "messages/metadata", data: toWire({ [message.id]: { metadata } }) });
        const accumulated = previous?.concat ? previous.concat(message) : message;
        this.partial.set(message.id, accumulated);
        out.push({ event: "messages/partial", data: toWire([accumulated]) });
      }
    }
    return out;
  }
}
