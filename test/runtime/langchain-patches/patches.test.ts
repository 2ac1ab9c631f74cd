/**
 * The patches on LangChain internals (src/runtime/langchain-patches/): each applies to the installed
 * libraries (an upgrade that changes a shape fails here, not silently in production), and a copy with
 * another shape is left as it is and named. What each patch does is tested in batched-store.test.ts
 * and tracing.test.ts.
 */
import t from "tap";
import { AsyncBatchedStore, InMemoryStore } from "@langchain/langgraph-checkpoint";
import { installLangChainPatches, missingPatches } from "../../../src/runtime/langchain-patches/index.js";

t.test("every patch applies to the installed @langchain/langgraph-checkpoint and @langchain/core", async (t) => {
  const report = installLangChainPatches({}, {});
  t.same(report, { batchedStore: true, leanTracing: true });
  t.same(missingPatches(report), []);
  // The instance fields the batched store's drain uses, as the library sets them.
  const batched = new AsyncBatchedStore(new InMemoryStore()) as unknown as Record<string, unknown>;
  t.type(batched.queue, Map, "queue");
  t.type(batched.nextKey, "number", "nextKey");
  t.ok("processingTask" in batched, "processingTask");
  t.type((batched.store as { batch?: unknown }).batch, "function", "store.batch");
});

t.test("with tracing configured the lean tracing is not wanted", async (t) => {
  const report = installLangChainPatches(
    { batchedStore: { prototype: {} }, core: { AsyncLocalStorageProviderSingleton: {}, _CONTEXT_VARIABLES_KEY: "k", CallbackManager: {} } },
    { LANGSMITH_TRACING: "true" },
  );
  t.equal(report.leanTracing, "not wanted");
});

t.test("a copy with another shape is left alone and named", async (t) => {
  const foreignClass = { prototype: { start() {}, stop() {} } }; // no enqueueOperation, no processBatchQueue
  const foreignCore = { AsyncLocalStorageProviderSingleton: { getInstance() {} }, _CONTEXT_VARIABLES_KEY: "k", CallbackManager: {} };
  const report = installLangChainPatches({ batchedStore: foreignClass, core: foreignCore }, {});
  t.same(report, { batchedStore: false, leanTracing: false });
  t.same(missingPatches(report), ["batched store", "lean tracing"]);
  t.same(Object.keys(foreignClass.prototype).sort(), ["start", "stop"], "nothing was replaced");
});
