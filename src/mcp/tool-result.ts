/**
 * A `tools/call` result from a run's result as `/runs/wait` returns it (pure): the output as
 * JSON text (and, when it is an object, as `structuredContent`, which MCP 2025-06-18 clients
 * read), or `isError: true` with the run's error.
 */
import { isPlainObject } from "../util/json.js";

export interface ToolResult {
  content: { type: "text"; text: string }[];
  structuredContent?: Record<string, unknown>;
  isError?: true;
}

export const errorResult = (message: string): ToolResult => ({ content: [{ type: "text", text: message }], isError: true });

export function toolResult(output: unknown): ToolResult {
  if (isPlainObject(output) && isPlainObject(output.__error__)) {
    const { error, message } = output.__error__ as { error?: unknown; message?: unknown };
    return errorResult([error, message].filter((part) => typeof part === "string" && part !== "").join(": ") || "The run failed");
  }
  return { content: [{ type: "text", text: JSON.stringify(output ?? null) }], ...(isPlainObject(output) ? { structuredContent: output } : {}) };
}
