/**
 * The request context rides in LangChain's own AsyncLocalStorage as a context variable (one storage in the
 * process instead of two): it must follow awaits, timers and nested contexts, survive the stores LangGraph
 * puts around every node, and leave LangChain's own config and context variables as they were.
 */
import { getContextVariable, setContextVariable } from "@langchain/core/context";
import { AsyncLocalStorageProviderSingleton, _CONTEXT_VARIABLES_KEY } from "@langchain/core/singletons";
import { Annotation, END, START, StateGraph, getConfig } from "@langchain/langgraph";
import { execFile } from "node:child_process";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import t from "tap";
import { currentRequestContext, logPositionHeaders, runInRequestContext, type RequestContext } from "../../src/context/request-context.js";
import { skipRunTreesUnlessTracing } from "../../src/runtime/langchain-patches/index.js";

const State = Annotation.Root({ seen: Annotation<Record<string, unknown>> });

const graph = new StateGraph(State)
  .addNode("look", async () => {
    await Promise.resolve();
    return { seen: { context: currentRequestContext(), configurable: getConfig().configurable?.answer, flavour: getContextVariable("flavour") } };
  })
  .addEdge(START, "look")
  .addEdge("look", END)
  .compile();

t.test("the context shares LangChain's storage and its context-variable key", async (t) => {
  t.equal(_CONTEXT_VARIABLES_KEY, Symbol.for("lc:context_variables"), "LangChain's context-variable key is the one the context uses");
  const context: RequestContext = { actor: "alice" };
  runInRequestContext(context, () => {
    const store = AsyncLocalStorageProviderSingleton.getInstance().getStore() as Record<symbol, Record<symbol, unknown>> | undefined;
    t.equal(store?.[_CONTEXT_VARIABLES_KEY]?.[Symbol.for("agent-server:request-context")], context, "the context is in LangChain's store");
  });
  t.equal(currentRequestContext(), undefined, "outside any context there is none");
});

t.test("the context follows awaits and timers, and an inner context hides the outer one only inside", async (t) => {
  const outer: RequestContext = { actor: "outer", requestId: "r1" };
  const inner: RequestContext = { actor: "inner" };
  const seen = await runInRequestContext(outer, async () => {
    await sleep(1);
    const timer = await new Promise<RequestContext | undefined>((resolve) => setTimeout(() => resolve(currentRequestContext()), 1));
    const nested = await runInRequestContext(inner, async () => {
      await sleep(1);
      return currentRequestContext();
    });
    return { afterAwait: currentRequestContext(), timer, nested, afterNested: currentRequestContext() };
  });
  t.equal(seen.afterAwait, outer);
  t.equal(seen.timer, outer);
  t.equal(seen.nested, inner);
  t.equal(seen.afterNested, outer);
});

t.test("the context object is shared, not copied: what a request records is what its response reads", async (t) => {
  const context: RequestContext = {};
  const headers = await runInRequestContext(context, async () => {
    await sleep(1);
    currentRequestContext()!.lastPosition = 41n;
    await sleep(1);
    return logPositionHeaders();
  });
  t.same(headers, { "X-Log-Position": "41" });
  t.equal(context.lastPosition, 41n);
});

for (const lean of [false, true]) {
  t.test(
    `inside a LangGraph node the context is still there, and LangChain's config and variables too (${lean ? "lean stores" : "LangChain's run trees"})`,
    async (t) => {
      if (lean) t.ok(skipRunTreesUnlessTracing({}), "the lean runWithConfig is installed");
      const context: RequestContext = { actor: "worker:w1", correlationId: "run-1" };
      const seen = await runInRequestContext(context, async () => {
        setContextVariable("flavour", "vanilla"); // a variable a graph's caller set, next to the request context
        return (await graph.invoke({ seen: {} }, { configurable: { answer: 42 } })).seen;
      });
      t.equal(seen.context, context, "the node sees the request context");
      t.equal(seen.configurable, 42, "getConfig() still finds the config");
      t.equal(seen.flavour, "vanilla", "LangChain's own context variables still pass");
    },
  );
}

t.test("with LangSmith tracing configured the context keeps a storage of its own, and still follows awaits", async (t) => {
  // A fresh process: the storage is chosen when the module loads. No graph runs there (tracing would post).
  const script = `
    import { AsyncLocalStorageProviderSingleton } from "@langchain/core/singletons";
    import { currentRequestContext, runInRequestContext } from ${JSON.stringify(new URL("../../src/context/request-context.ts", import.meta.url).href)};
    const context = { actor: "alice" };
    const seen = await runInRequestContext(context, async () => {
      await new Promise((resolve) => setTimeout(resolve, 1));
      return { same: currentRequestContext() === context, langChainStore: AsyncLocalStorageProviderSingleton.getInstance().getStore() ?? null };
    });
    console.log(JSON.stringify(seen));
  `;
  const { stdout } = await promisify(execFile)(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
    cwd: path.resolve(import.meta.dirname, "../.."),
    env: { ...process.env, LANGSMITH_TRACING: "true" },
  });
  t.same(JSON.parse(stdout), { same: true, langChainStore: null }, "the context is found, and LangChain's store is left empty");
});
