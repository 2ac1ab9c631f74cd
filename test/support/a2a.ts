import path from "node:path";
import { randomUUID } from "node:crypto";
import { startTestServer, type TestServer, type TestServerOptions } from "./server.js";

/** The graphs of the A2A tests: agent, delay, interrupt, error, counter (no `messages`). */
export const A2A_GRAPHS = path.join(path.dirname(path.dirname(new URL(import.meta.url).pathname)), "graphs", "a2a.json");

export function startA2AServer(options: TestServerOptions = {}): Promise<TestServer> {
  return startTestServer({ ...options, env: { LANGGRAPH_JSON: A2A_GRAPHS, ...options.env } });
}

export interface RawResponse {
  status: number;
  contentType: string;
  /**
   * The JSON body, or the `data:` payloads of an SSE body. Untyped on purpose: the tests read the answers of
   * every method and protocol version field by field (and pass them on), as tap's assertions check them.
   */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- see above
  json: any;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- see above
  events: any[];
  text: string;
}

/** POSTs a raw body to /a2a/{assistant} and reads the answer (JSON or SSE). */
export async function rpc(baseUrl: string, assistant: string, body: unknown, headers: Record<string, string> = {}): Promise<RawResponse> {
  const res = await fetch(`${baseUrl}/a2a/${assistant}`, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await res.text();
  const contentType = res.headers.get("content-type") ?? "";
  const events = contentType.startsWith("text/event-stream")
    ? text
        .split(/\r?\n/)
        .filter((l) => l.startsWith("data:"))
        .map((l) => JSON.parse(l.slice(5)))
    : [];
  let json: unknown;
  try {
    json = events.length ? undefined : JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, contentType, json, events, text };
}

/** A v0.3 user message with text parts. */
export function textMessage(text: string, extra: Record<string, unknown> = {}) {
  return { kind: "message" as const, role: "user" as const, messageId: randomUUID(), parts: [{ kind: "text" as const, text }], ...extra };
}
