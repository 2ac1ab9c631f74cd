/**
 * The graph runtime: LangGraph and LangChain core, the graphs of langgraph.json, the event-sourced
 * checkpointer. The server's assembly imports this module (and the run worker) after it listens:
 * LangGraph's modules (several hundred ES modules, which Node 20 compiles anew at every start) take
 * long to load, while nothing the server answers before a graph is needed (assistants, threads,
 * queued runs, crons, the Store) depends on them.
 *
 * A project's graphs run on the project's own `@langchain/*` (its node_modules, see module-loader.ts),
 * which may be other copies than the server's: what the server patches in LangGraph and core is
 * patched in the copies the graphs use as well, and what it compares by identity knows them.
 */
import path from "node:path";
import type { TypeSchemaReader } from "./type-schemas/reader.js";
import type { GraphCatalogue } from "./graph-catalogue.js";
import type { GraphRuntime } from "./lazy-graph-runtime.js";
import { installLangChainPatches, missingPatches, type PatchTargets } from "./langchain-patches/index.js";
import { registerMessagesReducer, registerZodRegistry } from "./graph-schemas.js";
import { registerSdkLogger } from "./sdk-logger.js";
import { loadGraphs } from "./graphs.js";
import { EventSourcedCheckpointSaver, type EventSourcedCheckpointSaverOptions } from "./checkpointer.js";
import { findPackage, packageEntryUrl, type PackageInfo } from "../module-loader.js";

export interface GraphRuntimeOptions {
  catalogue: GraphCatalogue;
  /** The directory of langgraph.json (graph paths are relative to it). */
  baseDir: string;
  typeSchemas?: TypeSchemaReader;
  logLevel: string;
  checkpointer: EventSourcedCheckpointSaverOptions;
}

/** Loads LangGraph, then the graphs (in langgraph.json's order), and builds the checkpointer. */
export async function loadGraphRuntime(o: GraphRuntimeOptions): Promise<GraphRuntime> {
  // Before any graph runs, in the server's own copy of the libraries (a project's copies: adoptProjectCopies).
  reportMissingPatches("the server's own LangChain", installLangChainPatches());
  await adoptProjectCopies(o.catalogue.ids().map((id) => o.catalogue.file(id)));
  // Before any graph file is imported: graphs may call the SDK's getLogger() at top level.
  registerSdkLogger(o.logLevel);
  const graphs = await loadGraphs(o.catalogue, o.baseDir, o.typeSchemas);
  return { graphs, checkpointer: new EventSourcedCheckpointSaver(o.checkpointer) };
}

/** The module a graph's import of `<pkg><subpath>` gets; undefined when it cannot be found or loaded. */
async function importOf(pkg: PackageInfo | undefined, subpath = "."): Promise<Record<string, unknown> | undefined> {
  const url = pkg && packageEntryUrl(pkg, subpath);
  if (!url) return undefined;
  try {
    return (await import(url)) as Record<string, unknown>;
  } catch {
    return undefined;
  }
}

/**
 * For each copy of LangGraph the graph files use (found from each file's place, as Node finds it),
 * and the checkpoint library and core that copy uses (found from its own place): the store
 * batching and the lean tracing are installed in them, and its messages reducer is known to the
 * schemas. The server's own copy is already done (a second install is a no-op); one that cannot be
 * read (another major version, missing parts) is left as it is.
 */
export async function adoptProjectCopies(graphFiles: string[]): Promise<void> {
  const seen = new Set<string>();
  for (const dir of new Set(graphFiles.map((file) => path.dirname(file)))) {
    const langgraph = findPackage("@langchain/langgraph", dir);
    if (!langgraph || seen.has(langgraph.dir)) continue;
    seen.add(langgraph.dir);
    const lg = await importOf(langgraph);
    if (typeof lg?.messagesStateReducer === "function") registerMessagesReducer(lg.messagesStateReducer);
    const zodSchema = await importOf(langgraph, "./zod/schema");
    if (zodSchema) registerZodRegistry(zodSchema, lg?.StateGraph);
    const checkpoint = await importOf(findPackage("@langchain/langgraph-checkpoint", langgraph.dir));
    const core = findPackage("@langchain/core", langgraph.dir);
    const [singletons, callbacks] = await Promise.all([importOf(core, "./singletons"), importOf(core, "./callbacks/manager")]);
    const targets: PatchTargets = {
      batchedStore: (checkpoint?.AsyncBatchedStore as { prototype: object } | undefined) ?? { prototype: {} },
      core: {
        AsyncLocalStorageProviderSingleton: singletons?.AsyncLocalStorageProviderSingleton,
        _CONTEXT_VARIABLES_KEY: (singletons?._CONTEXT_VARIABLES_KEY ?? Symbol("missing")) as PropertyKey,
        CallbackManager: callbacks?.CallbackManager,
      },
    };
    reportMissingPatches(`the LangChain of ${langgraph.dir}`, installLangChainPatches(targets));
  }
}

/** One line per copy whose shape a patch does not know: it still works, without that patch. */
function reportMissingPatches(copy: string, report: ReturnType<typeof installLangChainPatches>): void {
  const missing = missingPatches(report);
  if (missing.length > 0) console.error(`agent-server: ${copy} has another shape than expected; not patched: ${missing.join(", ")} (it runs, without them)`);
}
