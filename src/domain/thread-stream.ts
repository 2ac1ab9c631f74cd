/**
 * The thread stream (`GET /threads/{id}/stream`, the official server's "join thread stream"),
 * pure part: which SSE events each `stream_mode` sends for an event of the log, and the event ids.
 *
 * The stream follows `thread-{id}`; every RunEnqueued there names a run whose `run-{id}` is
 * followed to its end before the thread's next event (runs in the order they were enqueued).
 * An id names a place in those two streams: `<thread revision>-<n>`, where n = 0 is the thread
 * event itself and n = k + 1 the event at revision k of the run that thread event enqueued.
 * Revisions are the log's, so a resume works after a restart, in any process.
 */
import * as z from "zod";
import { isEvent } from "./event-of.js";

export const THREAD_STREAM_MODES = ["run_modes", "lifecycle", "state_update"] as const;
export type ThreadStreamMode = (typeof THREAD_STREAM_MODES)[number];
export const DEFAULT_THREAD_STREAM_MODES: readonly ThreadStreamMode[] = ["run_modes"];

/**
 * `stream_mode` as sent (the SDKs repeat the key; the Python server documents `stream_modes` and
 * comma lists): the distinct modes named, the default when none is.
 */
export const ThreadStreamModesSchema = z
  .union([z.string(), z.array(z.string())])
  .optional()
  .transform((value, ctx) => {
    const named = (value === undefined ? [] : Array.isArray(value) ? value : [value])
      .flatMap((v) => v.split(","))
      .map((v) => v.trim())
      .filter(Boolean);
    const unknown = named.filter((m) => !(THREAD_STREAM_MODES as readonly string[]).includes(m));
    if (unknown.length) {
      ctx.addIssue({ code: "custom", message: `unknown thread stream mode ${JSON.stringify(unknown[0])}; expected one of ${THREAD_STREAM_MODES.join(", ")}` });
      return z.NEVER;
    }
    return named.length ? [...new Set(named as ThreadStreamMode[])] : [...DEFAULT_THREAD_STREAM_MODES];
  });

/** Where a thread stream starts: the thread's first event, or after a place already seen. */
export type ThreadStreamStart =
  | { kind: "beginning" }
  /** Seen: the thread event at `thread` and, of the run it enqueued, its events up to revision `run` (none when undefined). */
  | { kind: "after"; thread: bigint; run?: bigint };

/** The SSE id of the thread event at `threadRevision`, or of the event at `runRevision` of the run it enqueued. */
export function threadStreamEventId(threadRevision: bigint, runRevision?: bigint): string {
  return `${threadRevision}-${runRevision === undefined ? 0n : runRevision + 1n}`;
}

/**
 * `Last-Event-ID` → where to resume: absent = undefined (the caller starts at the thread's
 * present), `-` or `-1` = from the beginning (as the Python server), else an id this stream sent.
 */
export function parseThreadStreamLastEventId(header: string | string[] | undefined): ThreadStreamStart | undefined | { error: string } {
  const value = (Array.isArray(header) ? header[header.length - 1] : header)?.trim();
  if (value === undefined || value === "") return undefined;
  if (value === "-" || value === "-1") return { kind: "beginning" };
  const m = /^(\d{1,19})-(\d{1,19})$/.exec(value);
  if (!m) return { error: `Last-Event-ID: expected an id of this stream ("<n>-<n>") or "-" for the beginning, got ${JSON.stringify(value)}` };
  const n = BigInt(m[2]);
  return n === 0n ? { kind: "after", thread: BigInt(m[1]) } : { kind: "after", thread: BigInt(m[1]), run: n - 1n };
}

/** One SSE event of the thread stream, without its id. */
export interface ThreadStreamOutput {
  event: string;
  data: unknown;
}

/** A thread event as the stream sees it (type and data; other types send nothing). */
export type ThreadLogEvent = { type: string; data: unknown };

/** The run a thread event enqueued, if it is a RunEnqueued: its events follow it in the stream. */
export function runEnqueuedBy(event: ThreadLogEvent): string | undefined {
  return isEvent(event, "RunEnqueued") ? event.data.run.run_id : undefined;
}

/** After these the thread has nothing more to say: the stream ends. */
export function endsThreadStream(event: ThreadLogEvent): boolean {
  return event.type === "ThreadDeleted" || event.type === "ThreadPurged";
}

/** What a thread event sends: `state_update` for a state changed outside a run (POST /state, supersteps). */
export function threadEventOutputs(modes: readonly ThreadStreamMode[], threadId: string, event: ThreadLogEvent): ThreadStreamOutput[] {
  if (!isEvent(event, "ThreadStateUpdated") || !modes.includes("state_update")) return [];
  const d = event.data;
  return [
    {
      event: "state_update",
      data: { thread_id: threadId, state: { values: d.values, next: d.next ?? [], interrupts: d.interrupts, created_at: d.updated_at } },
    },
  ];
}

/**
 * What an event of a run's stream sends: `run_modes` every chunk the run streamed (its own SSE
 * events) and `run_done` at its end; `lifecycle` the run's start (each attempt) and end, as
 * `metadata` events. A `run_done` asked for by both modes is sent once.
 */
export function runEventOutputs(modes: readonly ThreadStreamMode[], runId: string, event: ThreadLogEvent): ThreadStreamOutput[] {
  const runModes = modes.includes("run_modes");
  const lifecycle = modes.includes("lifecycle");
  if (isEvent(event, "RunOutput")) {
    const d = event.data;
    return runModes ? [{ event: d.event, data: d.data }] : [];
  }
  if (isEvent(event, "RunClaimed")) {
    const d = event.data;
    return lifecycle ? [{ event: "metadata", data: { status: "run_started", run_id: runId, attempt: d.attempt } }] : [];
  }
  if (isEvent(event, "RunEnded")) {
    const d = event.data;
    return runModes || lifecycle ? [{ event: "metadata", data: { status: "run_done", run_id: runId, run_status: d.status } }] : [];
  }
  return [];
}

/** A run's stream ends with its terminal event. */
export const endsRunStream = (event: ThreadLogEvent): boolean => event.type === "RunEnded";
