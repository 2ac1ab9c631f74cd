/**
 * LangSmith tracing costs nothing unless it is configured.
 *
 * Why RunTree objects show up in a profile with tracing off: @langchain/core's
 * `AsyncLocalStorageProviderSingleton.runWithConfig` (called for every node, edge and channel write LangGraph
 * runs) stores the runnable config in AsyncLocalStorage inside a `new RunTree({ tracingEnabled: false })` when
 * no LangChain tracer is attached. Each construction reads a dozen environment variables, formats a timestamp and
 * draws a UUIDv7 from `crypto.getRandomValues`: about 5 % of the server's CPU per run, for an object that is
 * never sent anywhere (upstream: langchain-ai/langchainjs#10043, closed unmerged).
 *
 * So when no tracing variable is set at start-up, `runWithConfig` is replaced by the same logic with a plain
 * carrier object instead of that RunTree. The carrier holds what readers of the store use: the config (under
 * `extra[lc:child_config]`, read by LangGraph's `getConfig()`), the context variables, and
 * `tracingEnabled: false` (read by CallbackManager and by langsmith's `traceable`, which then trace nothing,
 * as with the RunTree). With LANGSMITH_TRACING=true (or any variable `tracingConfigured` reads) nothing is replaced.
 */
import { CallbackManager } from "@langchain/core/callbacks/manager";
import type { RunnableConfig } from "@langchain/core/runnables";
import { AsyncLocalStorageProviderSingleton, _CONTEXT_VARIABLES_KEY } from "@langchain/core/singletons";
import { tracingConfigured } from "../context/tracing-env.js";

const LC_CHILD_KEY = Symbol.for("lc:child_config");
/** The name of LangChain's LangSmith tracer handler. */
const TRACER = "langchain_tracer";
let installed = false;

type Provider = typeof AsyncLocalStorageProviderSingleton;
type Store = Record<string | symbol, unknown>;

/**
 * Installs the lean `runWithConfig` unless tracing is configured in `env`; returns whether it is installed.
 * Call once at start-up, before any graph runs.
 */
export function skipRunTreesUnlessTracing(env: NodeJS.ProcessEnv = process.env): boolean {
  if (installed) return true;
  if (tracingConfigured(env)) return false;
  const provider = AsyncLocalStorageProviderSingleton as Provider;
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
      const manager = CallbackManager._configureSync(config?.callbacks, undefined, config?.tags, undefined, config?.metadata);
      const parentRunId = manager?.getParentRunId();
      const tracer = manager?.handlers?.find((handler) => handler?.name === TRACER) as
        | { getRunTreeWithTracingConfig(id: string): Store | undefined }
        | undefined;
      if (tracer && parentRunId) {
        traced = true;
        store = tracer.getRunTreeWithTracingConfig(parentRunId);
      }
    }
    if (!traced && !avoidCreatingRootRunTree) store = { name: "<runnable_lambda>", tracingEnabled: false, extra: {} };
    if (store) store.extra = { ...(store.extra as object | undefined), [LC_CHILD_KEY]: config };
    if (previous !== undefined && previous[_CONTEXT_VARIABLES_KEY] !== undefined) {
      store ??= {};
      store[_CONTEXT_VARIABLES_KEY] = previous[_CONTEXT_VARIABLES_KEY];
    }
    return storage.run(store, callback);
  } as Provider["runWithConfig"];
  installed = true;
  return true;
}

/** Whether a config's callbacks (a handler list or a callback manager) include LangChain's tracer. */
function passesTracer(callbacks: RunnableConfig["callbacks"]): boolean {
  if (!callbacks) return false;
  const handlers = Array.isArray(callbacks) ? callbacks : (callbacks as { handlers?: unknown[] }).handlers;
  return handlers?.some((handler) => (handler as { name?: string } | undefined)?.name === TRACER) ?? false;
}
