import { AsyncLocalStorage } from "node:async_hooks";
import { tracingConfigured } from "./tracing-env.js";

/**
 * Who is acting, and why, for everything an HTTP request or a run worker does (commands, appends).
 * Appends made outside any context (start-up, read-model listeners) are the system's.
 */
export interface RequestContext {
  /** Highest log position this request appended: returned in `X-Log-Position` so another process can wait for it. */
  lastPosition?: bigint;
  /** `X-Request-Id` (given or generated), echoed in the response and stamped on every event the request appends. */
  requestId?: string;
  /** The authenticated identity, `system`, or `worker:{owner}` (see actorOf). */
  actor?: string;
  /** The request or event that caused the appends (defaults to the request id). */
  causationId?: string;
  /** The run (or thread) the appends belong to, when the context knows it better than the stream name. */
  correlationId?: string;
}

/**
 * Where the context lives. On Node 20 every AsyncLocalStorage that has been entered costs every promise the
 * process makes from then on: an async_hooks init callback per storage copies its store onto the new promise
 * (a property added to each promise). LangChain already
 * keeps one storage for the whole process (global `Symbol.for("ls:tracing_async_local_storage")`, shared by
 * @langchain/core, @langchain/langgraph and langsmith), and carries "context variables"
 * (`Symbol.for("lc:context_variables")`, @langchain/core's `_CONTEXT_VARIABLES_KEY`) from each store it
 * replaces to the next. So the request context rides there, as one context variable, and the process has one
 * storage instead of two (test/context/request-context.test.ts checks the symbols against LangChain's exports).
 *
 * With LangSmith tracing configured, LangChain takes the top store for a traceable run tree; the context then
 * keeps a storage of its own, as the cost of tracing dwarfs that of a second storage.
 */
const LANGCHAIN_STORAGE_KEY = Symbol.for("ls:tracing_async_local_storage");
const CONTEXT_VARIABLES_KEY = Symbol.for("lc:context_variables");
const REQUEST_CONTEXT_VARIABLE = Symbol.for("agent-server:request-context");

type Store = { [key: symbol]: unknown };
type Variables = { [key: string | symbol]: unknown };

interface ContextCarrier {
  run<T>(context: RequestContext, fn: () => T): T;
  current(): RequestContext | undefined;
}

/** The storage LangChain uses, made now if LangChain has not made it yet (LangChain then adopts it). */
function langChainStorage(): AsyncLocalStorage<Store | undefined> {
  const global = globalThis as { [LANGCHAIN_STORAGE_KEY]?: AsyncLocalStorage<Store | undefined> };
  return (global[LANGCHAIN_STORAGE_KEY] ??= new AsyncLocalStorage<Store | undefined>());
}

function sharedWithLangChain(): ContextCarrier {
  const storage = langChainStorage();
  return {
    run(context, fn) {
      const previous = storage.getStore();
      const variables: Variables = { ...(previous?.[CONTEXT_VARIABLES_KEY] as Variables | undefined), [REQUEST_CONTEXT_VARIABLE]: context };
      // Whatever else the current store holds (a LangChain config, a run tree) stays visible inside.
      const store: Store = previous === undefined ? {} : Object.assign(Object.create(Object.getPrototypeOf(previous) as object | null) as Store, previous);
      store[CONTEXT_VARIABLES_KEY] = variables;
      return storage.run(store, fn);
    },
    current() {
      return (storage.getStore()?.[CONTEXT_VARIABLES_KEY] as Variables | undefined)?.[REQUEST_CONTEXT_VARIABLE] as RequestContext | undefined;
    },
  };
}

function ownStorage(): ContextCarrier {
  const storage = new AsyncLocalStorage<RequestContext>();
  return { run: (context, fn) => storage.run(context, fn), current: () => storage.getStore() };
}

const carrier: ContextCarrier = tracingConfigured() ? ownStorage() : sharedWithLangChain();

/** Runs `fn` (and everything it awaits, and the timers it sets) inside a context. */
export function runInRequestContext<T>(context: RequestContext, fn: () => T): T {
  return carrier.run(context, fn);
}

export function currentRequestContext(): RequestContext | undefined {
  return carrier.current();
}

/** The `X-Log-Position` header of the current request, when it appended anything. */
export function logPositionHeaders(): Record<string, string> {
  const position = carrier.current()?.lastPosition;
  return position === undefined ? {} : { "X-Log-Position": String(position) };
}
