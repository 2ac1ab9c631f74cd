/**
 * A2A parts ↔ graph input and output (pure).
 *   in:  text parts → one human message `{role: "user", content, id: messageId}` (needs a graph
 *        whose input has `messages`); data parts → merged into the top-level input; file parts
 *        → -32005 (not supported: the graphs here take text and JSON only).
 *   out: the last AI message of the state's `messages` as plain text; thread messages as A2A
 *        messages (human → user, ai → agent; tool and system messages are not conversation).
 */
import { A2AError, ErrorCode, invalidParams } from "./errors.js";
import type { DataPart, Message, Part } from "./types.js";
import { isPlainObject, type JsonObject } from "../domain/json.js";

export interface GraphInput {
  input?: JsonObject;
  command?: { resume: unknown };
}

const textOf = (parts: Part[]) => parts.filter((p): p is Extract<Part, { kind: "text" }> => p.kind === "text").map((p) => p.text);
const dataOf = (parts: Part[]) => parts.filter((p): p is DataPart => p.kind === "data").map((p) => p.data);

function rejectFiles(parts: Part[]): void {
  const file = parts.find((p) => p.kind === "file");
  if (file) {
    const type = file.kind === "file" && file.file.mimeType ? ` (${file.file.mimeType})` : "";
    throw new A2AError(ErrorCode.ContentTypeNotSupported, `File parts${type} are not supported: send text or data parts`);
  }
}

/**
 * The run input of a new task. `acceptsMessages`: the graph's input has a `messages` key.
 */
export function inputOfMessage(message: Message, acceptsMessages: boolean, assistant: string): GraphInput {
  rejectFiles(message.parts);
  const texts = textOf(message.parts);
  const input: JsonObject = {};
  for (const data of dataOf(message.parts)) Object.assign(input, data);
  if (texts.length > 0) {
    if (!acceptsMessages) {
      throw invalidParams(`Assistant '${assistant}' does not take text: its graph's input has no 'messages' key; send a data part with its input instead`);
    }
    const prior = Array.isArray(input.messages) ? input.messages : [];
    input.messages = [...prior, { role: message.role === "user" ? "user" : "assistant", content: texts.join("\n"), id: message.messageId }];
  }
  return { input };
}

/**
 * The resume value for a task waiting for input: an explicit `command.resume`, else a data part's
 * `resume` key (or the whole data part), else the text.
 */
export function resumeOfMessage(message: Message, command: { resume?: unknown } | undefined): GraphInput {
  rejectFiles(message.parts);
  if (command && "resume" in command && command.resume !== undefined) return { command: { resume: command.resume } };
  const data = dataOf(message.parts);
  if (data.length > 0) {
    const first = data[0];
    return { command: { resume: "resume" in first ? first.resume : first } };
  }
  return { command: { resume: textOf(message.parts).join("\n") } };
}

/** Plain text of a LangChain message content (string, or the text blocks of an array). */
export function contentText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return content == null ? "" : JSON.stringify(content);
  return content.map((b) => (typeof b === "string" ? b : isPlainObject(b) && b.type === "text" && typeof b.text === "string" ? b.text : "")).join("");
}

type WireMessage = { type?: unknown; role?: unknown; content?: unknown; id?: unknown };

function kindOf(m: WireMessage): "user" | "agent" | undefined {
  const t = m.type ?? m.role;
  if (t === "human" || t === "user" || t === "HumanMessageChunk") return "user";
  if (t === "ai" || t === "assistant" || t === "AIMessageChunk") return "agent";
  return undefined;
}

const messagesOf = (values: unknown): WireMessage[] =>
  isPlainObject(values) && Array.isArray(values.messages) ? (values.messages.filter(isPlainObject) as WireMessage[]) : [];

/** The reply of a run: the last AI message's text; for graphs without messages, their values as JSON. */
export function replyOf(values: unknown): { text: string; data?: JsonObject } {
  const messages = messagesOf(values);
  for (let i = messages.length - 1; i >= 0; i--) {
    if (kindOf(messages[i]) === "agent") return { text: contentText(messages[i].content) };
  }
  if (messages.length === 0 && isPlainObject(values)) return { text: JSON.stringify(values), data: values };
  return { text: "" };
}

/** The thread's conversation as A2A messages (ids: the LangChain ids, else stable per position). */
export function historyOf(values: unknown, ids: { taskId: string; contextId: string }): Message[] {
  const out: Message[] = [];
  messagesOf(values).forEach((m, i) => {
    const role = kindOf(m);
    if (!role) return;
    out.push({
      kind: "message",
      role,
      parts: [{ kind: "text", text: contentText(m.content) }],
      messageId: typeof m.id === "string" && m.id ? m.id : `${ids.taskId}-${i}`,
      taskId: ids.taskId,
      contextId: ids.contextId,
    });
  });
  return out;
}

/** A streamed `messages` chunk's text, when it is an AI message with text. */
export function deltaOf(chunk: unknown): string | undefined {
  const m = Array.isArray(chunk) ? chunk[0] : chunk;
  if (!isPlainObject(m) || kindOf(m as WireMessage) !== "agent") return undefined;
  const text = contentText((m as WireMessage).content);
  return text === "" ? undefined : text;
}
