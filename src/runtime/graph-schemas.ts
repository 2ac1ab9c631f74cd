/**
 * JSON schemas of a compiled graph, extracted at runtime in the official JS server's order
 * (its `getRuntimeGraphSchema`):
 *   1. StateSchema state (`getJsonSchema()` / `getInputJsonSchema()`; ReducedValue extras included);
 *   2. zod state registered in LangGraph's schema registry (`withLangGraph` metadata such as
 *      `jsonSchemaExtra`), through `@langchain/langgraph/zod/schema` — state is the update schema;
 *   3. any zod v3/v4 schema converted directly (no registry extras; input = state, nothing required).
 * When none applies, the official server reads the graph file's TypeScript types
 * (type-schemas/, used by graphs.ts); where that cannot answer either (a JavaScript file, a
 * compiler pass that timed out), `channelGraphSchema` stands in:
 *   4. an `Annotation` state: an object schema of its channels, typed where the channel says
 *      enough (a messages reducer, a list/topic, a default value's type).
 * Nothing found gives null, never an error.
 */
import { messagesStateReducer, StateGraph } from "@langchain/langgraph";
import { getConfigTypeSchema, getInputTypeSchema, getOutputTypeSchema, getUpdateTypeSchema } from "@langchain/langgraph/zod/schema";
import { toJsonSchema } from "@langchain/core/utils/json_schema";
import { isZodSchemaV3, isZodSchemaV4 } from "@langchain/core/utils/types";
import { isPlainObject } from "../util/json.js";

export type JsonSchema = Record<string, unknown>;

/** Schemas of one graph as the official JS parser returns them (null when unknown). */
export interface RawGraphSchema {
  state: JsonSchema | null;
  input: JsonSchema | null;
  output: JsonSchema | null;
  config: JsonSchema | null;
}

interface Builder {
  _schemaRuntimeDefinition?: unknown;
  _inputRuntimeDefinition?: unknown;
  _outputRuntimeDefinition?: unknown;
  _configRuntimeSchema?: unknown;
  _schemaDefinition?: unknown;
  _inputDefinition?: unknown;
  _outputDefinition?: unknown;
}

interface StateSchemaLike {
  getJsonSchema(): unknown;
  getInputJsonSchema(): unknown;
}

/** StateGraph's marker for "input = the state schema, every field optional". */
const PARTIAL_STATE = Symbol.for("langgraph.state.partial");

function isStateSchemaLike(value: unknown): value is StateSchemaLike {
  return isPlainObject(value) && typeof value.getJsonSchema === "function" && typeof value.getInputJsonSchema === "function";
}

/** A schema object, or null for anything else (undefined, a throw). */
function attempt(fn: () => unknown): JsonSchema | null {
  try {
    const value = fn();
    return isPlainObject(value) ? (value as JsonSchema) : null;
  } catch {
    return null;
  }
}

const empty = (s: RawGraphSchema) => s.state === null && s.input === null && s.output === null && s.config === null;

function fromStateSchema(b: Builder): RawGraphSchema | undefined {
  const stateDef = b._schemaRuntimeDefinition;
  const inputDef = b._inputRuntimeDefinition;
  const outputDef = b._outputRuntimeDefinition;
  if (!isStateSchemaLike(stateDef) && !isStateSchemaLike(inputDef) && !isStateSchemaLike(outputDef)) return undefined;
  const result: RawGraphSchema = {
    state: isStateSchemaLike(stateDef) ? attempt(() => stateDef.getJsonSchema()) : null,
    input: isStateSchemaLike(inputDef)
      ? attempt(() => inputDef.getInputJsonSchema())
      : inputDef === PARTIAL_STATE && isStateSchemaLike(stateDef)
        ? attempt(() => stateDef.getInputJsonSchema())
        : null,
    output: isStateSchemaLike(outputDef) ? attempt(() => outputDef.getJsonSchema()) : null,
    // The official tier leaves config out ("not supported yet"); a zod context schema is known, so give it.
    config: zodToJson(b._configRuntimeSchema),
  };
  return empty(result) ? undefined : result;
}

/** The zod-registry readers of LangGraph's `zod/schema`: one copy's registry knows only that copy's schemas. */
export interface ZodRegistryReaders {
  getUpdateTypeSchema: typeof getUpdateTypeSchema;
  getInputTypeSchema: typeof getInputTypeSchema;
  getOutputTypeSchema: typeof getOutputTypeSchema;
  getConfigTypeSchema: typeof getConfigTypeSchema;
}

/** A copy's readers, with that copy's StateGraph: the graphs built by it are its registry's. */
interface ZodRegistry extends ZodRegistryReaders {
  stateGraph: unknown;
}

const zodRegistries: ZodRegistry[] = [{ getUpdateTypeSchema, getInputTypeSchema, getOutputTypeSchema, getConfigTypeSchema, stateGraph: StateGraph }];

/**
 * Makes another copy's `@langchain/langgraph/zod/schema` readers used (graph-runtime.ts registers a
 * project's), for the graphs whose builder is an instance of that copy's `stateGraph`.
 */
export function registerZodRegistry(readers: Partial<ZodRegistryReaders>, stateGraph?: unknown): void {
  const { getUpdateTypeSchema: u, getInputTypeSchema: i, getOutputTypeSchema: o, getConfigTypeSchema: c } = readers;
  if (typeof u !== "function" || typeof i !== "function" || typeof o !== "function" || typeof c !== "function") return;
  if (zodRegistries.some((r) => r.getUpdateTypeSchema === u)) return;
  zodRegistries.push({ getUpdateTypeSchema: u, getInputTypeSchema: i, getOutputTypeSchema: o, getConfigTypeSchema: c, stateGraph });
}

/**
 * The registries to read a graph's zod state from, its own copy's first: another copy's registry
 * does not know the graph's `withLangGraph` fields and would convert them without their extras.
 */
function registriesFor(graph: unknown): ZodRegistry[] {
  const builder = (graph as { builder?: unknown } | null)?.builder;
  const owns = (r: ZodRegistry) => typeof r.stateGraph === "function" && builder instanceof (r.stateGraph as new () => unknown);
  return [...zodRegistries.filter(owns), ...zodRegistries.filter((r) => !owns(r))];
}

function fromZodRegistry(graph: unknown): RawGraphSchema | undefined {
  const g = graph as Parameters<typeof getUpdateTypeSchema>[0];
  for (const r of registriesFor(graph)) {
    const result: RawGraphSchema = {
      state: attempt(() => r.getUpdateTypeSchema(g)),
      input: attempt(() => r.getInputTypeSchema(g)),
      output: attempt(() => r.getOutputTypeSchema(g)),
      config: attempt(() => r.getConfigTypeSchema(g)),
    };
    if (!empty(result)) return result;
  }
  return undefined;
}

function zodToJson(schema: unknown): JsonSchema | null {
  if (!schema || !(isZodSchemaV4(schema) || isZodSchemaV3(schema))) return null;
  return attempt(() => toJsonSchema(schema as Parameters<typeof toJsonSchema>[0]));
}

function fromZodDirect(b: Builder): RawGraphSchema | undefined {
  const state = zodToJson(b._schemaRuntimeDefinition);
  const result: RawGraphSchema = {
    state,
    input: zodToJson(b._inputRuntimeDefinition) ?? (state ? { ...state, required: undefined } : null),
    output: zodToJson(b._outputRuntimeDefinition),
    config: zodToJson(b._configRuntimeSchema),
  };
  return empty(result) ? undefined : result;
}

// ---------------------------------------------------------------------------------------------
// Annotation state: what the channels tell

/**
 * The messages reducers known by identity: the server's copy of LangGraph's, and those of the copies a
 * project's graphs use (registered by graph-runtime.ts as it finds them).
 */
const messagesReducers = new Set<unknown>([messagesStateReducer]);

/** Makes another copy's `messagesStateReducer` known as the messages reducer. */
export function registerMessagesReducer(reducer: unknown): void {
  if (typeof reducer === "function") messagesReducers.add(reducer);
}

/**
 * Whether a channel's reducer is LangGraph's messages reducer, of whichever copy of LangGraph: a
 * known one, or, from a copy nobody registered, a function by that name.
 */
export function isMessagesReducer(operator: unknown): boolean {
  if (typeof operator !== "function") return false;
  return messagesReducers.has(operator) || operator.name === "messagesStateReducer";
}

const MESSAGES: JsonSchema = { type: "array", items: { type: "object" }, langgraph_type: "messages", description: "A list of chat messages" };

function typeOfDefault(value: unknown): JsonSchema {
  if (Array.isArray(value)) return { type: "array" };
  if (value === null) return { type: "null" };
  switch (typeof value) {
    case "string":
      return { type: "string" };
    case "number":
      return { type: "number" };
    case "boolean":
      return { type: "boolean" };
    case "object":
      return { type: "object" };
    default:
      return {};
  }
}

/** One channel's schema: messages, a topic (list), the type of its default, or any. */
function channelSchema(channel: unknown): JsonSchema {
  if (!isPlainObject(channel)) return {};
  if (isMessagesReducer(channel.operator)) return { ...MESSAGES };
  const name = (channel as { lc_graph_name?: unknown }).lc_graph_name;
  if (name === "Topic") return { type: "array" };
  const initial = channel.initialValueFactory;
  if (typeof initial === "function") {
    try {
      return typeOfDefault((initial as () => unknown)());
    } catch {
      return {};
    }
  }
  return {};
}

function channelsSchema(channels: unknown): JsonSchema | null {
  if (!isPlainObject(channels)) return null;
  const properties: Record<string, JsonSchema> = {};
  for (const [key, channel] of Object.entries(channels)) {
    if (key.startsWith("__")) continue;
    properties[key] = channelSchema(channel);
  }
  if (Object.keys(properties).length === 0) return null;
  return { type: "object", properties };
}

function fromAnnotation(b: Builder): RawGraphSchema | undefined {
  const result: RawGraphSchema = {
    state: channelsSchema(b._schemaDefinition),
    input: channelsSchema(b._inputDefinition),
    output: channelsSchema(b._outputDefinition),
    config: null,
  };
  return empty(result) ? undefined : result;
}

const NONE: RawGraphSchema = { state: null, input: null, output: null, config: null };

function builderOf(graph: unknown): Builder | undefined {
  const builder = isPlainObject(graph) ? graph.builder : undefined;
  return isPlainObject(builder) ? (builder as Builder) : undefined;
}

/** Tiers 1 to 3 (what the graph's runtime schemas tell); undefined when none applies. */
export function runtimeGraphSchema(graph: unknown): RawGraphSchema | undefined {
  const builder = builderOf(graph);
  if (!builder) return undefined;
  return fromStateSchema(builder) ?? fromZodRegistry(graph) ?? fromZodDirect(builder);
}

/** Tier 4 (an Annotation state's channels); all null when the graph has none. */
export function channelGraphSchema(graph: unknown): RawGraphSchema {
  const builder = builderOf(graph);
  return (builder && fromAnnotation(builder)) ?? NONE;
}

/** The graph's schemas without reading its types (tiers 1 to 4); all null when nothing is known. */
export function extractGraphSchema(graph: unknown): RawGraphSchema {
  return runtimeGraphSchema(graph) ?? channelGraphSchema(graph);
}

/**
 * A schema read from the graph's types, with what its channels add: a messages channel's
 * property gets `langgraph_type: "messages"`, as a zod `withLangGraph` or a StateSchema
 * `MessagesValue` state would carry it (the types alone cannot tell a reducer).
 */
export function withChannelHints(schema: RawGraphSchema, graph: unknown): RawGraphSchema {
  const builder = builderOf(graph);
  const channels = builder?._schemaDefinition;
  if (!isPlainObject(channels)) return schema;
  const messageKeys = Object.entries(channels)
    .filter(([, c]) => isPlainObject(c) && isMessagesReducer(c.operator))
    .map(([k]) => k);
  if (messageKeys.length === 0) return schema;
  const hint = (s: JsonSchema | null): JsonSchema | null => {
    if (!s || !isPlainObject(s.properties)) return s;
    const properties = { ...(s.properties as Record<string, JsonSchema>) };
    for (const key of messageKeys) if (isPlainObject(properties[key])) properties[key] = { ...properties[key], langgraph_type: "messages" };
    return { ...s, properties };
  };
  return { state: hint(schema.state), input: hint(schema.input), output: hint(schema.output), config: schema.config };
}
