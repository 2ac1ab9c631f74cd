/**
 * Event metadata that makes every event attributable (pure):
 * - `actor`: the authenticated identity (custom-auth user, `api-key`, `anonymous`), `system` for
 *   start-up and housekeeping, `worker:{owner}` for what the run worker appends;
 * - `request_id`: the HTTP request that appended it (absent for the worker and the system);
 * - `causation_id`: what caused it: the request, or for the worker the request that enqueued the run;
 * - `correlation_id`: the run it belongs to, else its thread (else the stream's entity).
 */
import type { RequestContext } from "./request-context.js";

export const SYSTEM_ACTOR = "system";

/** The event with its attribution merged into its metadata (what the writer set itself wins). */
export function attributed<E extends { data: unknown; metadata?: Record<string, unknown> }>(stream: string, event: E, context: RequestContext | undefined): E {
  const metadata: Record<string, unknown> = { actor: context?.actor ?? SYSTEM_ACTOR };
  if (context?.requestId) metadata.request_id = context.requestId;
  const causation = context?.causationId ?? context?.requestId;
  if (causation) metadata.causation_id = causation;
  const correlation = correlationOf(stream, event.data, context);
  if (correlation) metadata.correlation_id = correlation;
  return { ...event, metadata: { ...metadata, ...event.metadata } };
}

const RUN_STREAM = /^run-(?:input-|command-|output-)?(.+)$/;

/** The run or thread an event of `stream` belongs to. */
export function correlationOf(stream: string, data: unknown, context: RequestContext | undefined): string | undefined {
  if (context?.correlationId) return context.correlationId;
  const run = RUN_STREAM.exec(stream);
  if (run) return run[1];
  if (stream.startsWith("thread-")) {
    const d = (data ?? {}) as { run_id?: unknown; run?: { run_id?: unknown } };
    if (typeof d.run_id === "string") return d.run_id;
    if (typeof d.run?.run_id === "string") return d.run.run_id;
    return stream.slice("thread-".length);
  }
  if (stream.startsWith("checkpoints-")) return stream.slice("checkpoints-".length);
  const dash = stream.indexOf("-");
  return dash > 0 ? stream.slice(dash + 1) : undefined;
}
