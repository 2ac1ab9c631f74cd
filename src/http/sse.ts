import type { OutgoingHttpHeaders } from "node:http";
import type { FastifyReply } from "fastify";
import type { EventStore } from "../eventstore/types.js";
import { runStream } from "../domain/runs.js";
import { HttpError } from "./errors.js";
import { isLargeValueMarker, resolveLarge } from "../eventstore/large-values.js";

/** Idle time after which a `: heartbeat` comment keeps the connection (and the SDK's watchdog) alive. */
export const HEARTBEAT_MS = 5_000;

/**
 * A Server-Sent Events response in the Python server's framing:
 * `event: <name>\r\ndata: <json>\r\nid: <id>\r\n\r\n`, `: heartbeat` comments while idle.
 */
export class SseWriter {
  private lastWrite = performance.now();
  private readonly timer: NodeJS.Timeout;
  private readonly closeListeners: (() => void)[] = [];
  private readonly endListeners: (() => void)[] = [];
  closed = false;

  constructor(
    private readonly reply: FastifyReply,
    headers: Record<string, string>,
    heartbeatMs = HEARTBEAT_MS,
  ) {
    reply.hijack();
    const raw = reply.raw;
    raw.writeHead(200, {
      // Headers hooks already set (CORS) would be lost on a hijacked reply otherwise.
      ...(reply.getHeaders() as OutgoingHttpHeaders),
      "Content-Type": "text/event-stream; charset=utf-8",
      "Cache-Control": "no-store",
      Connection: "keep-alive",
      "X-Accel-Buffering": "no",
      ...headers,
    });
    raw.flushHeaders();
    raw.on("close", () => {
      if (this.closed) return;
      this.closed = true;
      clearInterval(this.timer);
      for (const l of this.closeListeners) l();
    });
    this.timer = setInterval(() => {
      if (performance.now() - this.lastWrite >= heartbeatMs - 50) this.write(": heartbeat\r\n\r\n");
    }, heartbeatMs);
    this.timer.unref();
  }

  /** Called when the client goes away (not when we end the response ourselves). */
  onClose(listener: () => void): void {
    this.closeListeners.push(listener);
  }

  /** Writes one event; resolves at once, or once the socket drained when the client reads slowly. */
  event(name: string, data: unknown, id?: bigint | string): Promise<void> | undefined {
    const idLine = id === undefined ? "" : `id: ${String(id)}\r\n`;
    if (this.write(`event: ${name}\r\ndata: ${JSON.stringify(data)}\r\n${idLine}\r\n`)) return undefined;
    const raw = this.reply.raw;
    return new Promise((resolve) => {
      const done = () => {
        raw.off("drain", done);
        raw.off("close", done);
        resolve();
      };
      raw.on("drain", done);
      raw.on("close", done);
    });
  }

  /** False when the socket buffer is full (backpressure). */
  private write(text: string): boolean {
    if (this.closed) return true;
    this.lastWrite = performance.now();
    return this.reply.raw.write(text);
  }

  /** Ends the response (also used at shutdown: tails notice `closed` and stop). */
  end(): void {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.timer);
    for (const l of this.endListeners) l();
    this.reply.raw.end();
  }

  /** Called when the response ends, whoever ends it. */
  onEnd(listener: () => void): void {
    this.endListeners.push(listener);
  }
}

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
 * `Last-Event-ID` → exclusive start revision: absent or `-1` = from the start; otherwise the id of
 * the last event the client saw (a stream revision).
 */
export function parseLastEventId(header: string | string[] | undefined): bigint | "start" {
  const value = Array.isArray(header) ? header[header.length - 1] : header;
  if (value === undefined || value.trim() === "" || value.trim() === "-1" || value.trim() === "-") return "start";
  if (!/^\d+$/.test(value.trim())) throw new HttpError(422, `Last-Event-ID: must be an event id (a non-negative integer) or -1, got "${value}"`);
  return BigInt(value.trim());
}

/**
 * Tails `run-{id}` from the log: every RunOutput after `from` (exclusive) becomes an SSE event whose
 * id is its stream revision; ends after RunEnded or when the client leaves. Never talks to a worker.
 */
export async function tailRunStream(
  store: EventStore,
  runId: string,
  from: bigint | "start",
  sse: SseWriter,
  /** Awaited after RunEnded before the response ends (the thread shows the outcome by then). */
  settled?: () => Promise<unknown>,
  /** Only events this accepts are sent (their ids stay the stream revisions). */
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
        const backpressure = sse.event(d.event, data, e.revision);
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
