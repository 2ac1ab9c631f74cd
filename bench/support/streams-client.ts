/**
 * One client of the `streams` benchmark: `POST /threads`, then `POST /threads/{id}/runs/stream` with
 * `stream_mode: ["messages-tuple", "values"]`, read to the end. The SSE is parsed minimally (`event:` and
 * `data:` lines, an event ending at a blank line) to timestamp the first event (`metadata`), the first token
 * (the first `messages` event whose message chunk has content) and the end (the body's end), to count the
 * token events and to check the last `values` event ends with the model's answer.
 */
import type { Dispatcher } from "undici";

export interface StreamTiming {
  /** performance.now() when the client began (its POST /threads) and when it sent the stream request. */
  began_at: number;
  stream_sent_at: number;
  /** POST /threads, ms. */
  thread_ms: number;
  /** From sending the runs/stream request to the first SSE event, to the first token event, to the body's end. */
  first_event_ms: number;
  first_token_ms: number;
  end_ms: number;
  /** `messages` events with content. */
  tokens: number;
  /** v2 only: from sending `run.start` to its answer (the run accepted), ms. */
  run_start_ms?: number;
}

/** An SSE event: its name (`message` when the event had no `event:` line) and its data lines joined. */
export interface SseEvent {
  event: string;
  data: string;
}

/**
 * Splits an SSE byte stream into events, fed text as it arrives (chunks may cut lines anywhere).
 * Comments (`:`) and `id:`/`retry:` lines are ignored.
 */
export class SseParser {
  private partial = "";
  private event = "";
  private data: string[] = [];

  constructor(private readonly onEvent: (e: SseEvent) => void) {}

  push(text: string): void {
    const lines = (this.partial + text).split("\n");
    this.partial = lines.pop()!;
    for (const raw of lines) {
      const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
      if (line === "") {
        if (this.data.length || this.event) this.onEvent({ event: this.event || "message", data: this.data.join("\n") });
        this.event = "";
        this.data = [];
      } else if (line.startsWith("event:")) this.event = line.slice(6).trim();
      else if (line.startsWith("data:")) this.data.push(line.slice(line.startsWith("data: ") ? 6 : 5));
    }
  }

  /** The body ended: an event not closed by a blank line is delivered. */
  end(): void {
    if (this.partial) this.push("\n");
    this.push("\n");
  }
}

/** Whether a `messages` event's data (`[message chunk, metadata]`) carries content. */
export function isTokenEvent(data: string): boolean {
  const parsed = JSON.parse(data) as unknown;
  const chunk = (Array.isArray(parsed) ? parsed[0] : parsed) as { content?: unknown } | undefined;
  const content = chunk?.content;
  if (typeof content === "string") return content.length > 0;
  return Array.isArray(content) && content.length > 0;
}

/** The text of the last message of a `values` event's data, or undefined. */
function lastMessageText(data: string): string | undefined {
  const values = JSON.parse(data) as { messages?: { content?: unknown }[] };
  const content = values.messages?.at(-1)?.content;
  return typeof content === "string" ? content : undefined;
}

/** `POST /threads`: the new thread's id (throws on an HTTP error). */
async function newThread(pool: Dispatcher): Promise<string> {
  const created = await pool.request({ path: "/threads", method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
  const text = await created.body.text();
  if (created.statusCode !== 200) throw new Error(`POST /threads: HTTP ${created.statusCode} ${text.slice(0, 300)}`);
  return (JSON.parse(text) as { thread_id: string }).thread_id;
}

/**
 * One client: a new thread, then one streamed run of `assistantId` on it, read to the end. Throws on an HTTP
 * error, an `error` event, a first event other than `metadata`, no token, or a last `values` without `answer`.
 */
export async function streamOneRun(pool: Dispatcher, assistantId: string, answer: string): Promise<StreamTiming> {
  const t0 = performance.now();
  const threadId = await newThread(pool);
  const t1 = performance.now();
  const res = await pool.request({
    path: `/threads/${threadId}/runs/stream`,
    method: "POST",
    headers: { "content-type": "application/json", accept: "text/event-stream" },
    body: JSON.stringify({
      assistant_id: assistantId,
      input: { messages: [{ role: "user", content: "hello" }] },
      stream_mode: ["messages-tuple", "values"],
    }),
  });
  if (res.statusCode !== 200) throw new Error(`POST /threads/{id}/runs/stream: HTTP ${res.statusCode} ${(await res.body.text()).slice(0, 300)}`);
  let firstEvent = NaN;
  let firstEventName = "";
  let firstToken = NaN;
  let tokens = 0;
  let lastValues: string | undefined;
  const parser = new SseParser(({ event, data }) => {
    const now = performance.now();
    if (!firstEventName) {
      firstEventName = event;
      firstEvent = now - t1;
    }
    if (event === "error") throw new Error(`error event: ${data.slice(0, 300)}`);
    if (event === "messages" && isTokenEvent(data)) {
      if (tokens === 0) firstToken = now - t1;
      tokens++;
    } else if (event === "values") lastValues = data;
  });
  const decoder = new TextDecoder();
  for await (const chunk of res.body) parser.push(decoder.decode(chunk as Buffer, { stream: true }));
  parser.push(decoder.decode());
  parser.end();
  const end = performance.now() - t1;
  if (firstEventName !== "metadata") throw new Error(`first event "${firstEventName}", expected "metadata"`);
  if (tokens === 0) throw new Error("stream without a token event");
  const last = lastValues === undefined ? undefined : lastMessageText(lastValues);
  if (last !== answer) throw new Error(`last values event ends with ${JSON.stringify(last)}, expected the model's answer`);
  return { began_at: t0, stream_sent_at: t1, thread_ms: t1 - t0, first_event_ms: firstEvent, first_token_ms: firstToken, end_ms: end, tokens };
}

/** The channels a v2 client of this benchmark subscribes to: what a chat UI shows. */
const V2_CHANNELS = ["messages", "values", "lifecycle"];

/** A v2 protocol event as the SSE `data` carries it (src/protocol/log-events.ts). */
interface V2Event {
  method: string;
  params: { namespace: string[]; data: unknown };
}

/** Whether a v2 `messages` event is a text delta with content (the protocol's token event). */
export function isV2TokenEvent(data: unknown): boolean {
  const d = data as { event?: unknown; content_block?: { type?: unknown; text?: unknown }; delta?: { type?: unknown; text?: unknown } } | undefined;
  if (d?.event !== "content-block-delta") return false;
  const text = d.delta?.text ?? d.content_block?.text;
  return typeof text === "string" && text.length > 0;
}

/**
 * One client of the thread streaming protocol (v2), as useStream opens it: a new thread, a subscription
 * (`POST /threads/{id}/stream/events`, channels messages, values and lifecycle) open before the run, then the run
 * started by the protocol's own command (`POST /threads/{id}/commands`, `run.start`), read until the root lifecycle
 * says it ended. Times from sending the command: the first event (the run's `lifecycle: running`), the first token (the first
 * text delta of a `messages` event) and the end. Needs two connections (the subscription holds one).
 */
export async function streamOneRunV2(pool: Dispatcher, assistantId: string, answer: string): Promise<StreamTiming> {
  const json = { "content-type": "application/json" };
  const t0 = performance.now();
  const threadId = await newThread(pool);
  const subscription = await pool.request({
    path: `/threads/${threadId}/stream/events`,
    method: "POST",
    headers: { ...json, accept: "text/event-stream" },
    body: JSON.stringify({ channels: V2_CHANNELS }),
  });
  if (subscription.statusCode !== 200) {
    throw new Error(`POST /threads/{id}/stream/events: HTTP ${subscription.statusCode} ${(await subscription.body.text()).slice(0, 300)}`);
  }
  const t1 = performance.now();
  let runStartMs = NaN;
  const run = pool
    .request({
      path: `/threads/${threadId}/commands`,
      method: "POST",
      headers: json,
      body: JSON.stringify({ id: 1, method: "run.start", params: { assistant_id: assistantId, input: { messages: [{ role: "user", content: "hello" }] } } }),
    })
    .then(async (res) => {
      const text = await res.body.text();
      runStartMs = performance.now() - t1;
      if (res.statusCode !== 200 || (JSON.parse(text) as { type?: unknown }).type !== "success") {
        throw new Error(`POST /threads/{id}/commands run.start: HTTP ${res.statusCode} ${text.slice(0, 300)}`);
      }
    });
  let firstEvent = NaN;
  let firstToken = NaN;
  let tokens = 0;
  let lastValues: unknown;
  let ended: string | undefined;
  const parser = new SseParser(({ data }) => {
    if (ended || !data) return;
    const now = performance.now();
    const event = JSON.parse(data) as V2Event;
    if (!event.method || event.params?.namespace === undefined) return;
    if (Number.isNaN(firstEvent)) firstEvent = now - t1;
    const root = event.params.namespace.length === 0;
    if (event.method === "messages" && isV2TokenEvent(event.params.data)) {
      if (tokens === 0) firstToken = now - t1;
      tokens++;
    } else if (event.method === "values" && root) lastValues = event.params.data;
    else if (event.method === "lifecycle" && root) {
      const status = (event.params.data as { event?: string }).event;
      if (status === "completed" || status === "failed" || status === "interrupted") ended = status;
    }
  });
  const decoder = new TextDecoder();
  try {
    for await (const chunk of subscription.body) {
      parser.push(decoder.decode(chunk as Buffer, { stream: true }));
      if (ended) break;
    }
  } finally {
    subscription.body.destroy();
  }
  await run;
  const end = performance.now() - t1;
  if (ended !== "completed") throw new Error(`the run's lifecycle ended ${JSON.stringify(ended)}, expected "completed"`);
  if (tokens === 0) throw new Error("stream without a token event");
  const last = textOf((lastValues as { messages?: { content?: unknown }[] } | undefined)?.messages?.at(-1)?.content);
  if (last !== answer) throw new Error(`last values event ends with ${JSON.stringify(last)}, expected the model's answer`);
  return {
    began_at: t0,
    stream_sent_at: t1,
    thread_ms: t1 - t0,
    first_event_ms: firstEvent,
    first_token_ms: firstToken,
    end_ms: end,
    tokens,
    run_start_ms: runStartMs,
  };
}

/** A message's content as text: a string, or (v2 carries content blocks) its text blocks joined. */
function textOf(content: unknown): string | undefined {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return undefined;
  return content.map((block) => (typeof (block as { text?: unknown })?.text === "string" ? (block as { text: string }).text : "")).join("");
}
