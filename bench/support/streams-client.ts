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

/**
 * One client: a new thread, then one streamed run of `assistantId` on it, read to the end. Throws on an HTTP
 * error, an `error` event, a first event other than `metadata`, no token, or a last `values` without `answer`.
 */
export async function streamOneRun(pool: Dispatcher, assistantId: string, answer: string): Promise<StreamTiming> {
  const t0 = performance.now();
  const created = await pool.request({ path: "/threads", method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
  const createdText = await created.body.text();
  if (created.statusCode !== 200) throw new Error(`POST /threads: HTTP ${created.statusCode} ${createdText.slice(0, 300)}`);
  const threadId = (JSON.parse(createdText) as { thread_id: string }).thread_id;
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
