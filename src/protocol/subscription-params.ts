/**
 * The params of `subscription.subscribe` (the same on every transport) → a filter of the thread's
 * events, or why not. Channels are LangGraph's supported ones and `custom:<name>`.
 */
import { SUPPORTED_CHANNELS } from "@langchain/langgraph/stream";
import type { EventFilter } from "./log-events.js";

const isChannel = (value: unknown): value is string =>
  typeof value === "string" && ((SUPPORTED_CHANNELS as ReadonlySet<string>).has(value) || value.startsWith("custom:"));

export function filterOfParams(params: Record<string, unknown>): EventFilter | string {
  const channels = params.channels;
  if (!Array.isArray(channels) || channels.length === 0) return "subscription.subscribe requires a non-empty channels array.";
  if (!channels.every(isChannel)) return "subscription.subscribe received an unsupported channel.";
  const filter: EventFilter = { channels };
  const namespaces = params.namespaces;
  if (Array.isArray(namespaces) && namespaces.every((ns) => Array.isArray(ns) && ns.every((s) => typeof s === "string")))
    filter.namespaces = namespaces as string[][];
  if (typeof params.depth === "number" && Number.isInteger(params.depth) && params.depth >= 0) filter.depth = params.depth;
  // Not in the protocol's subscribe params, but in its SSE request: the same resume from any seq, over a WebSocket.
  if (params.since !== undefined) {
    if (typeof params.since !== "number" || !Number.isInteger(params.since) || params.since < 0)
      return "subscription.subscribe since must be a non-negative integer.";
    filter.since = params.since;
  }
  return filter;
}
