import type { OutgoingHttpHeaders } from "node:http";
import type { FastifyReply } from "fastify";

/** Idle time after which a `: heartbeat` comment keeps the connection (and the SDK's watchdog) alive. */
export const HEARTBEAT_MS = 5_000;

/**
 * A Server-Sent Events response in the Python server's framing:
 * `event: <name>\r\ndata: <json>\r\nid: <id>\r\n\r\n`, `: heartbeat` comments while idle.
 *
 * What it holds for a client that does not read is bounded: a writer that awaits `event` before the next
 * one leaves at most the socket's high-water mark plus one event in memory, and no heartbeat is queued
 * behind bytes the client has not taken.
 */
/** The text of an SSE data line for `data`: its JSON (`undefined` for a value JSON has no text for, as a template literal writes it). */
export function sseDataText(data: unknown): string {
  return String(JSON.stringify(data));
}

export class SseWriter {
  /** The writers whose responses are open, for `pendingBytes`. */
  private static readonly open = new Set<SseWriter>();

  /** SSE responses open now. */
  static get openCount(): number {
    return SseWriter.open.size;
  }

  /** Bytes written to open SSE responses that their clients have not taken yet (held by the process). */
  static pendingBytes(): number {
    let sum = 0;
    for (const writer of SseWriter.open) sum += writer.reply.raw.writableLength;
    return sum;
  }

  private lastWrite = performance.now();
  private readonly timer: NodeJS.Timeout;
  private readonly closeListeners: (() => void)[] = [];
  private readonly endListeners: (() => void)[] = [];
  closed = false;
  /** Whether this turn's writes are corked (see write). */
  private corked = false;

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
    SseWriter.open.add(this);
    raw.on("close", () => {
      SseWriter.open.delete(this);
      if (this.closed) return;
      this.closed = true;
      clearInterval(this.timer);
      for (const l of this.closeListeners) l();
    });
    this.timer = setInterval(() => {
      // A client that has not taken what was sent is not idle: a heartbeat would only grow the backlog.
      if (raw.writableNeedDrain) return;
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
    return this.eventJson(name, sseDataText(data), id);
  }

  /** Writes one event whose data is JSON text already (one line: JSON.stringify makes no line breaks); as `event`. */
  eventJson(name: string, json: string, id?: bigint | string): Promise<void> | undefined {
    const idLine = id === undefined ? "" : `id: ${String(id)}\r\n`;
    if (this.write(`event: ${name}\r\ndata: ${json}\r\n${idLine}\r\n`)) return undefined;
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
    const raw = this.reply.raw;
    // The events a tail has at hand in one go (a run's batch of tokens) leave in one socket write, not one each:
    // corked until the microtasks of this turn are done.
    if (!this.corked) {
      this.corked = true;
      raw.cork();
      process.nextTick(this.uncork);
    }
    return raw.write(text);
  }

  private readonly uncork = (): void => {
    this.corked = false;
    // end() has uncorked already; a destroyed socket needs nothing.
    if (!this.closed) this.reply.raw.uncork();
  };

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
