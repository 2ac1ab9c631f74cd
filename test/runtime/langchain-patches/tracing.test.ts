/**
 * Tracing off costs nothing: without a tracing variable, LangGraph runs store their config in a plain carrier
 * instead of a fresh langsmith RunTree per node; with LANGSMITH_TRACING=true nothing is replaced.
 * Runs a real LangGraph graph in this process, before and after the switch.
 */
import { BaseCallbackHandler } from "@langchain/core/callbacks/base";
import { getContextVariable, setContextVariable } from "@langchain/core/context";
import { AsyncLocalStorageProviderSingleton } from "@langchain/core/singletons";
import { Annotation, END, START, StateGraph, getConfig } from "@langchain/langgraph";
import t from "tap";
import { skipRunTreesUnlessTracing } from "../../../src/runtime/langchain-patches/index.js";
import { tracingConfigured } from "../../../src/context/tracing-env.js";

const State = Annotation.Root({ seen: Annotation<Record<string, unknown>> });

/** A node that reports what it sees of the async context: the store object, its config, a context variable. */
const graph = new StateGraph(State)
  .addNode("look", () => {
    const store = AsyncLocalStorageProviderSingleton.getInstance().getStore() as Record<string, unknown> | undefined;
    return {
      seen: {
        runTree: typeof (store as { createChild?: unknown } | undefined)?.createChild === "function",
        fromTracer: store?.fromTracer === true,
        tracingEnabled: store?.tracingEnabled,
        configurable: getConfig().configurable?.answer,
        contextVariable: getContextVariable("flavour"),
      },
    };
  })
  .addEdge(START, "look")
  .addEdge("look", END)
  .compile();

async function look(): Promise<Record<string, unknown>> {
  // A context variable set around the invocation, as a caller of LangChain may do.
  return AsyncLocalStorageProviderSingleton.getInstance().run(undefined, async () => {
    setContextVariable("flavour", "vanilla");
    return (await graph.invoke({ seen: {} }, { configurable: { answer: 42 } })).seen;
  });
}

t.test("which variables turn tracing on", async (t) => {
  t.equal(tracingConfigured({}), false);
  t.equal(tracingConfigured({ LANGSMITH_TRACING: "false" }), false);
  for (const name of ["LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2", "LANGSMITH_TRACING_V2", "LANGCHAIN_TRACING"]) {
    t.equal(tracingConfigured({ [name]: "true" }), true, name);
  }
});

t.test("with tracing configured nothing is replaced; without, nodes get a carrier that is no RunTree", async (t) => {
  const original = AsyncLocalStorageProviderSingleton.runWithConfig;
  t.equal(skipRunTreesUnlessTracing({ LANGSMITH_TRACING: "true" }), false, "LANGSMITH_TRACING=true: not installed");
  t.equal(AsyncLocalStorageProviderSingleton.runWithConfig, original, "runWithConfig untouched");
  const before = await look();
  t.same(
    before,
    { runTree: true, fromTracer: false, tracingEnabled: false, configurable: 42, contextVariable: "vanilla" },
    "library default: a RunTree per node",
  );

  t.equal(skipRunTreesUnlessTracing({}), true, "no tracing variable: installed");
  t.not(AsyncLocalStorageProviderSingleton.runWithConfig, original);
  const after = await look();
  t.same(after, { ...before, runTree: false }, "same config, context variables and tracing flag; no RunTree");
});

/** Stands for LangChain's LangSmith tracer (same handler name), without a client or a network. */
class FakeTracer extends BaseCallbackHandler {
  name = "langchain_tracer";
  asked: string[] = [];
  getRunTreeWithTracingConfig(id: string): Record<string, unknown> {
    this.asked.push(id);
    return { fromTracer: true, tracingEnabled: true, extra: {} };
  }
}

t.test("without tracing configured, a tracer passed in a run's callbacks still gets the run tree of each node", async (t) => {
  t.equal(skipRunTreesUnlessTracing({}), true, "installed");
  const tracer = new FakeTracer();
  const seen = (await graph.invoke({ seen: {} }, { configurable: { answer: 7 }, callbacks: [tracer] })).seen;
  t.equal(seen.fromTracer, true, "the node runs inside the tracer's run tree");
  t.equal(seen.configurable, 7, "with the run's config");
  t.ok(tracer.asked.length > 0, "the tracer was asked for it, by parent run id");
  const plain = (await graph.invoke({ seen: {} }, { configurable: { answer: 8 } })).seen;
  t.same(
    { fromTracer: plain.fromTracer, runTree: plain.runTree, configurable: plain.configurable },
    { fromTracer: false, runTree: false, configurable: 8 },
    "without it: the carrier",
  );
});
