/**
 * The thread streaming protocol (v2) through the official SDK's `ThreadStream`, as the protocol
 * tests drive it: a stream over SSE or a WebSocket, the events it delivers recorded, and promises
 * that settle when those events show something (never a sleep).
 */
import { Client, ProtocolSseTransportAdapter, ProtocolWebSocketTransportAdapter } from "@langchain/langgraph-sdk";
import { WebSocket } from "ws";

/** The data of an event as these tests read it: `event` on lifecycle events, `interrupt_id` on input.requested, `messages` on values. */
export type EventData = { event: string; interrupt_id: string; messages: { content: string }[] };
export type ProtocolEvent = { type: "event"; seq: number; event_id: string; method: string; params: { namespace: string[]; data: EventData } };

export const TRANSPORTS = ["sse", "websocket"] as const;
export type Transport = (typeof TRANSPORTS)[number];

export interface ThreadStreamOptions {
  /** An existing thread (else the SDK makes up a new id). */
  threadId?: string;
  /**
   * Headers the WebSocket upgrade carries (an API key, a bearer token). The SDK's WebSocket transport
   * refuses a client's headers (a browser's WebSocket cannot send any), so with these the stream is
   * given the SDK's own WebSocket adapter, unbound to the client's headers, whose socket sends them.
   * Over SSE the client's own headers are sent.
   */
  headers?: Record<string, string>;
}

/** `client.threads.stream(...)` over `transport`; on Node 20 (no global WebSocket) with the `ws` package's WebSocket. */
export function threadStream(client: Client, apiUrl: string, assistantId: string, transport: Transport, options: ThreadStreamOptions = {}) {
  const { threadId, headers } = options;
  const webSocketFactory = (url: string) => (headers ? new WebSocket(url, { headers }) : new WebSocket(url)) as never;
  const streamOptions =
    transport === "sse"
      ? { assistantId, transport }
      : headers
        ? { assistantId, transport: new ProtocolWebSocketTransportAdapter({ apiUrl, webSocketFactory }) }
        : { assistantId, transport, webSocketFactory };
  return threadId ? client.threads.stream(threadId, streamOptions as never) : client.threads.stream(streamOptions as never);
}

export type ThreadStreamHandle = ReturnType<typeof threadStream>;

/** Resolves once `predicate` holds for the events seen so far (or rejects after a deadline, naming what was seen). */
export function until(events: ProtocolEvent[], predicate: (events: ProtocolEvent[]) => boolean, listen: (cb: () => void) => void, ms = 15_000): Promise<void> {
  return new Promise((resolve, reject) => {
    if (predicate(events)) return resolve();
    const timer = setTimeout(
      () => reject(new Error(`timed out; saw ${events.map((e) => `${e.method}:${JSON.stringify(e.params.data).slice(0, 60)}`).join(" | ")}`)),
      ms,
    );
    listen(() => {
      if (predicate(events)) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
}

/** Every event the thread's transport delivers (`onEvent`), and `wait(predicate)` over them. */
export function record(thread: { onEvent(cb: (e: unknown) => void): unknown }) {
  const events: ProtocolEvent[] = [];
  const listeners: (() => void)[] = [];
  thread.onEvent((e) => {
    events.push(e as ProtocolEvent);
    for (const l of listeners) l();
  });
  const wait = (predicate: (events: ProtocolEvent[]) => boolean) => until(events, predicate, (cb) => listeners.push(cb));
  return { events, wait };
}

/** Whether each event's seq is greater than the one before it (no event twice, none out of order). */
export const seqsIncrease = (events: readonly { seq: number }[]) => events.every((e, i) => i === 0 || e.seq > events[i - 1]!.seq);

/** Whether the root namespace's lifecycle shows `status` (running, completed, interrupted, failed). */
export const rootLifecycle = (events: ProtocolEvent[], status: string) =>
  events.some((e) => e.method === "lifecycle" && e.params.namespace.length === 0 && e.params.data.event === status);

/** The texts of the messages `thread.messages` assembles, and a promise of the first that `predicate` accepts (or a rejection after a deadline). */
export function assembledMessages(thread: ThreadStreamHandle, predicate: (text: string) => boolean, ms = 15_000) {
  const texts: string[] = [];
  const found = new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no such message assembled; saw ${JSON.stringify(texts)}`)), ms);
    void (async () => {
      for await (const message of thread.messages as AsyncIterable<{ text: PromiseLike<string> }>) {
        const text = await message.text;
        texts.push(text);
        if (predicate(text)) {
          clearTimeout(timer);
          return resolve(text);
        }
      }
      clearTimeout(timer);
      reject(new Error(`the messages ended without such a message; saw ${JSON.stringify(texts)}`));
    })().catch((error: unknown) => {
      clearTimeout(timer);
      reject(error as Error);
    });
  });
  return { texts, found };
}

/**
 * A resume from `since` through the SDK, until `stop(seen)` holds (or a deadline): over a WebSocket with
 * `ThreadStream.subscribe({..., since})` (its events as `onEvent` sees them: the SDK ends a subscription's
 * iterator at a root terminal lifecycle, onEvent sees every event the socket brings); over SSE with the
 * SDK's SSE transport (`ProtocolSseTransportAdapter.openEventStream({..., since})`), since ThreadStream's
 * shared SSE stream leaves `since` out of the filter it sends.
 */
export async function resumeSince(
  client: Client,
  apiUrl: string,
  transport: Transport,
  threadId: string,
  filter: { channels: string[]; since: number },
  stop: (seen: ProtocolEvent[]) => boolean,
  options: { headers?: Record<string, string> } = {},
): Promise<ProtocolEvent[]> {
  if (transport === "websocket") {
    const thread = threadStream(client, apiUrl, "unused", "websocket", { threadId, headers: options.headers });
    try {
      const { events, wait } = record(thread);
      await thread.subscribe(filter as never);
      await wait(stop);
      return events;
    } finally {
      await thread.close();
    }
  }
  const adapter = new ProtocolSseTransportAdapter({ apiUrl, threadId, defaultHeaders: options.headers ?? {} });
  const stream = adapter.openEventStream(filter as never);
  const seen: ProtocolEvent[] = [];
  const deadline = setTimeout(() => void adapter.close(), 15_000);
  try {
    await stream.ready;
    for await (const event of stream.events as AsyncIterable<ProtocolEvent>) {
      seen.push(event);
      if (stop(seen)) return seen;
    }
    throw new Error(`the stream ended first; saw ${seen.map((e) => `${e.method}:${JSON.stringify(e.params.data).slice(0, 60)}`).join(" | ")}`);
  } finally {
    clearTimeout(deadline);
    stream.close();
    await adapter.close();
  }
}

/**
 * The outcome of a raw WebSocket upgrade: refused with an HTTP response (its status and body; `closedByServer(ms)`
 * tells whether the server then closed the connection within `ms`, and destroys it from this side if not), or
 * accepted and then closed by the server (its close code and reason, and the frames it sent before), or neither
 * within the deadline (`open`: the socket was accepted and left open; it is closed from this side).
 */
export type UpgradeOutcome =
  | { kind: "refused"; status: number; body: string; closedByServer: (ms: number) => Promise<boolean> }
  | { kind: "closed"; code: number; reason: string; frames: unknown[] }
  | { kind: "open"; frames: unknown[] }
  | { kind: "error"; message: string };

/** Opens a WebSocket to `url` with `headers`, sends `messages` once it is open, and reports how it ended (see UpgradeOutcome). */
export function upgrade(url: string, headers: Record<string, string> = {}, messages: unknown[] = [], ms = 10_000): Promise<UpgradeOutcome> {
  return new Promise((resolve) => {
    const socket = new WebSocket(url, { headers });
    const frames: unknown[] = [];
    const deadline = setTimeout(() => {
      resolve({ kind: "open", frames });
      socket.terminate();
    }, ms);
    const settle = (outcome: UpgradeOutcome) => {
      clearTimeout(deadline);
      resolve(outcome);
    };
    // With this listener `ws` leaves the refused connection open: whether the server closes it is for the caller to see.
    socket.on("unexpected-response", (request, response) => {
      const connection = response.socket;
      const closed = new Promise<void>((done) => (connection.destroyed ? done() : connection.once("close", () => done())));
      const closedByServer = async (within: number) => {
        let timer: NodeJS.Timeout | undefined;
        const inTime = await Promise.race([closed.then(() => true), new Promise<boolean>((r) => (timer = setTimeout(() => r(false), within)))]);
        clearTimeout(timer);
        connection.destroy();
        return inTime;
      };
      let body = "";
      response.setEncoding("utf8");
      response.on("data", (chunk: string) => (body += chunk));
      response.on("end", () => settle({ kind: "refused", status: response.statusCode ?? 0, body, closedByServer }));
    });
    socket.on("open", () => {
      for (const message of messages) socket.send(JSON.stringify(message));
    });
    socket.on("message", (data: Buffer) => frames.push(JSON.parse(data.toString("utf8"))));
    socket.on("close", (code, reason) => settle({ kind: "closed", code, reason: reason.toString("utf8"), frames }));
    socket.on("error", (error) => settle({ kind: "error", message: String(error) }));
  });
}
