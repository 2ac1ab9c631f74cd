/**
 * The global logger `getLogger()` of `@langchain/langgraph-sdk/logging` returns inside graphs.
 *
 * The SDK looks up `globalThis[Symbol.for("langgraph.api.sdk-logger")]` and throws when nothing is
 * registered, so it must be registered before any graph file is imported (graphs may call
 * `getLogger()` at module top level). The SDK types it as a winston logger: leveled methods that
 * take `(message, ...meta)` or one info object and return the logger. Lines are written by pino
 * as JSON, with `langgraph_node` added when the call happens inside a graph node.
 */
import { getConfig } from "@langchain/langgraph";
import { pino, type DestinationStream, type Level, type Logger as PinoLogger } from "pino";

export const SDK_LOGGER = Symbol.for("langgraph.api.sdk-logger");

/** winston's default levels, as the SDK's `Logger` type lists them, mapped to pino's. */
const LEVELS: Record<string, Level> = {
  error: "error",
  warn: "warn",
  help: "info",
  data: "info",
  info: "info",
  debug: "debug",
  prompt: "info",
  http: "debug",
  verbose: "debug",
  input: "info",
  silly: "trace",
};

export type SdkLogger = Record<keyof typeof LEVELS, (...args: unknown[]) => SdkLogger>;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The graph node this call runs in, if any (getConfig() reads the run's async context). */
function currentNode(): unknown {
  try {
    return getConfig()?.metadata?.langgraph_node;
  } catch {
    return undefined;
  }
}

/** A winston-shaped facade over a pino logger. */
export function sdkLoggerOver(base: PinoLogger): SdkLogger {
  const facade = {} as SdkLogger;
  for (const [name, level] of Object.entries(LEVELS)) {
    facade[name] = (...args: unknown[]) => {
      if (!base.isLevelEnabled(level)) return facade;
      const fields: Record<string, unknown> = {};
      let message: unknown = args[0];
      if (args.length === 1 && isRecord(message) && !(message instanceof Error)) {
        const { message: inner, ...rest } = message;
        Object.assign(fields, rest);
        message = inner;
      }
      const extra: unknown[] = [];
      for (const meta of args.slice(1)) {
        if (meta instanceof Error) fields.err = meta;
        else if (isRecord(meta)) Object.assign(fields, meta);
        else extra.push(meta);
      }
      if (extra.length) fields.meta = extra;
      if (message instanceof Error) {
        fields.err = message;
        message = message.message;
      }
      const node = currentNode();
      if (node !== undefined) fields.langgraph_node = node;
      base[level](fields, typeof message === "string" ? message : JSON.stringify(message));
      return facade;
    };
  }
  return facade;
}

/** Registers the SDK logger (pino at `level`, to stdout unless a destination is given); returns it. */
export function registerSdkLogger(level: string, destination?: DestinationStream): SdkLogger {
  const base = pino({ level, base: { name: "graph" } }, destination);
  const logger = sdkLoggerOver(base);
  (globalThis as Record<symbol, unknown>)[SDK_LOGGER] = logger;
  return logger;
}
