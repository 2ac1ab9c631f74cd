/**
 * LangSmith tracing costs nothing unless it is configured.
 *
 * Why RunTree objects are built with tracing off: @langchain/core's
 * `AsyncLocalStorageProviderSingleton.runWithConfig` (called for every node, edge and channel write LangGraph
 * runs) stores the runnable config in AsyncLocalStorage inside a `new RunTree({ tracingEnabled: false })` when
 * no LangChain tracer is attached. Each construction reads a dozen environment variables, formats a timestamp and
 * draws a UUIDv7 from `crypto.getRandomValues`, all for an object that is
 * never sent anywhere (upstream: langchain-ai/langchainjs#10043, closed unmerged).
 *
 * So when no tracing variable is set at start-up, `runWithConfig` is replaced by the same logic with a plain
 * carrier object instead of that RunTree. The carrier holds what readers of the store use: the config (under
 * `extra[lc:child_config]`, read by LangGraph's `getConfig()`), the context variables, and
 * `tracingEnabled: false` (read by CallbackManager and by langsmith's `traceable`, which then trace nothing,
 * as with the RunTree). With LANGSMITH_TRACING=true (or any variable `tracingConfigured` reads) nothing is replaced.
 * A project's graphs may run on their own copy of @langchain/core: each copy's provider is replaced (see
 * ../graph-runtime.ts), with that copy's CallbackManager, which is why they can be passed in.
 */
import { CallbackManager } from "@langchain/core/callbacks/manager";
import type { RunnableConfig } from "@langchain/core/runnables";
import { AsyncLocalStorageProviderSingleton, _CONTEXT_VARIABLES_KEY } from "@langchain/core/singletons";
import { tracingConfigured } from "../../context/tracing-env.js";

const LC_CHILD_KEY = Symbol.for("lc:child_config");
/** The name of LangChain's LangSmith tracer handler. */
const TRACER = "langchain_tracer";
const INSTALLED = Symbol.for("agent-server.lean-run-with-config");

type Provider = typeof AsyncLocalStorageProviderSingleton;
type Store = Record<string | symbol, unknown>;

/** The parts of one copy of @langchain/core the lean `runWithConfig` uses. */
export interface CoreCopy {
  AsyncLocalStorageProviderSingleton: unknown;
  _CONTEXT_VARIABLES_KEY: PropertyKey;
  CallbackManager: unknown;
}

const serverCore: CoreCopy = { AsyncLocalStorageProviderSingleton, _CONTEXT_VARIABLES_KEY, CallbackManager };

/**
 * Installs the lean `runWithConfig` (in the given copy of @langchain/core; the server's own by default)
 * unless tracing is configured in `env`; returns whether it is installed. Call once at start-up, before
 * any graph runs. A copy whose provider does not have the expected shape is left alone.
 */
export function skipRunTreesUnlessTracing(env: NodeJS.ProcessEnv = process.env, core: CoreCopy = serverCore): boolean {
  const provider = core.AsyncLocalStorageProviderSingleton as Provider & { [INSTALLED]?: boolean };
  if (provider?.[INSTALLED]) return true;
  if (tracingConfigured(env)) return false;
  if (typeof provider?.runWithConfig !== "function" || typeof provider.getInstance !== "function") return false;
  const callbackManager = core.CallbackManager as typeof CallbackManager;
  if (typeof callbackManager?._configureSync !== "function") return false;
  const contextKey = core._CONTEXT_VARIABLES_KEY as typeof _CONTEXT_VARIABLES_KEY;
  provider.runWithConfig = function runWithConfig<T>(
    this: Provider,
    config: RunnableConfig | undefined,
    callback: () => T,
    avoidCreatingRootRunTree?: boolean,
  ): T {
    const storage = this.getInstance();
    const previous = storage.getStore() as Store | undefined;
    let store: Store | undefined;
    let traced = false;
    // A tracer passed explicitly in the config's callbacks still gets its RunTree, as before. Tracing is not
    // configured, so a tracer can come from nowhere else: without one, the callback manager (which reads
    // the environment at each call) is not even configured.
    if (passesTracer(config?.callbacks)) {
      const manager = callbackManager._configureSync(config?.callbacks, undefined, config?.tags, undefined, config?.metadata);
      const parentRunId = manager?.getParentRunId();
      const tracer = manager?.handlers?.find((handler) => handler?.name === TRACER) as
        { getRunTreeWithTracingConfig(id: string): Store | undefined } | undefined;
      if (tracer && parentRunId) {
        traced = true;
        store = tracer.getRunTreeWithTracingConfig(parentRunId);
      }
    }
    if (!traced && !avoidCreatingRootRunTree) store = { name: "<runnable_lambda>", tracingEnabled: false, extra: {} };
    if (store) store.extra = { ...(store.extra as object | undefined), [LC_CHILD_KEY]: config };
    if (previous !== undefined && previous[contextKey] !== undefined) {
      store ??= {};
      store[contextKey] = previous[contextKey];
    }
    return storage.run(store, callback);
  } as Provider["runWithConfig"];
  provider[INSTALLED] = true;
  return true;
}

/** Whether a config's callbacks (a handler list or a callback manager) include LangChain's tracer. */
function passesTracer(callbacks: RunnableConfig["callbacks"]): boolean {
  if (!callbacks) return false;
  const handlers = Array.isArray(callbacks) ? callbacks : (callbacks as { handlers?: unknown[] }).handlers;
  return handlers?.some((handler) => (handler as { name?: string } | undefined)?.name === TRACER) ?? false;
}
