export { SseWriter, HEARTBEAT_MS } from "../util/sse-writer.js";
import { HttpError } from "./errors.js";

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
