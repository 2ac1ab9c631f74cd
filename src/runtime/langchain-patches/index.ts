/**
 * The server's patches on LangChain internals, in one place. Each replaces methods of a class or a
 * singleton in one copy of the libraries (the server's own, or a project's: see ../graph-runtime.ts)
 * after checking the shape it relies on: a copy whose shape changed is left as it is, and the caller
 * reports it. test/runtime/langchain-patches/patches.test.ts installs each on every LangGraph version the server
 * supports, so an upgrade that changes a shape fails a test instead of switching a patch off silently.
 */
import { tracingConfigured } from "../../context/tracing-env.js";
import { drainBatchedStoresOnDemand } from "./batched-store.js";
import { skipRunTreesUnlessTracing, type CoreCopy } from "./lean-tracing.js";

export { drainBatchedStoresOnDemand, drainsOnDemand } from "./batched-store.js";
export { skipRunTreesUnlessTracing, type CoreCopy } from "./lean-tracing.js";

/** One copy of the libraries: its AsyncBatchedStore class and its core's singletons (the server's own when left out). */
export interface PatchTargets {
  batchedStore?: { prototype: object };
  core?: CoreCopy;
}

/** Whether each patch is in place: false when its target has another shape. */
export interface PatchReport {
  /** A run's store drains when asked instead of polling a timer. */
  batchedStore: boolean;
  /** No LangSmith RunTree per node while tracing is off ("not wanted" when tracing is configured). */
  leanTracing: boolean | "not wanted";
}

export function installLangChainPatches(targets: PatchTargets = {}, env: NodeJS.ProcessEnv = process.env): PatchReport {
  const batchedStore = targets.batchedStore ? drainBatchedStoresOnDemand(targets.batchedStore) : drainBatchedStoresOnDemand();
  const leanTracing = tracingConfigured(env) ? "not wanted" : targets.core ? skipRunTreesUnlessTracing(env, targets.core) : skipRunTreesUnlessTracing(env);
  return { batchedStore, leanTracing };
}

/** The patches of a report that could not be installed, by name (empty when all are in place). */
export function missingPatches(report: PatchReport): string[] {
  return [...(report.batchedStore ? [] : ["batched store"]), ...(report.leanTracing === false ? ["lean tracing"] : [])];
}
