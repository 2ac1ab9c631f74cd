/**
 * A tool's `inputSchema` from its graph's schemas (pure). MCP requires an object schema: the
 * graph's input schema when it is one, else `{"type": "object"}`. A graph with a context schema
 * whose input has no `context` field of its own also takes `context` (the run's context), so a
 * client can see and send it.
 */
import { isPlainObject } from "../util/json.js";

export type JsonSchema = Record<string, unknown>;

export interface ToolInput {
  inputSchema: JsonSchema;
  /** Whether `arguments.context` is the run's context rather than part of the input. */
  takesContext: boolean;
}

const hasProperties = (schema: JsonSchema | null): schema is JsonSchema & { properties: Record<string, unknown> } =>
  schema !== null && isPlainObject(schema.properties) && Object.keys(schema.properties).length > 0;

export function toolInput(input: JsonSchema | null, context: JsonSchema | null): ToolInput {
  const base: JsonSchema = input && input.type === "object" ? input : { type: "object" };
  const properties = isPlainObject(base.properties) ? base.properties : {};
  if (!hasProperties(context) || "context" in properties) return { inputSchema: base, takesContext: false };
  const { $schema: _dialect, ...contextSchema } = context;
  const description = "The run's context (the graph's context schema), not part of its input";
  return { inputSchema: { ...base, properties: { ...properties, context: { ...contextSchema, description } } }, takesContext: true };
}

/** The run's input and context from a call's arguments. */
export function splitArguments(args: Record<string, unknown>, takesContext: boolean): { input: Record<string, unknown>; context?: Record<string, unknown> } {
  if (!takesContext || !isPlainObject(args.context)) return { input: args };
  const { context, ...input } = args;
  return { input, context: context as Record<string, unknown> };
}
