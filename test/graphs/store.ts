/**
 * `store`: reads and writes the long-term store in its nodes, through each of the three ways a
 * LangGraph.js node reaches it.
 *   - `write` (via `config.store`): puts `{note}` at (["memories", user], "last").
 *   - `read`  (via `getStore()`): reads ["memories", user] "profile" (put by a client) and "last".
 *   - `tally` (via the runtime's `store`): searches ["memories", user].
 * Output: `{profile, seen, count, same}` (`same`: getStore() and config.store are one object).
 * (Not `listNamespaces`: LangGraph.js wraps a graph's store in an AsyncBatchedStore, which does
 * not pass that operation on; the server's BaseStore answers it when called directly.)
 */
import { Annotation, END, START, StateGraph, getStore, type LangGraphRunnableConfig } from "@langchain/langgraph";

const State = Annotation.Root({
  user: Annotation<string>,
  note: Annotation<string>,
  profile: Annotation<string | null>,
  seen: Annotation<string | null>,
  count: Annotation<number>,
  same: Annotation<boolean>,
});

export const graph = new StateGraph(State)
  .addNode("write", async (state, config: LangGraphRunnableConfig) => {
    await config.store!.put(["memories", state.user], "last", { note: state.note });
    return {};
  })
  .addNode("read", async (state, config: LangGraphRunnableConfig) => {
    const store = getStore()!;
    const profile = await store.get(["memories", state.user], "profile");
    const last = await store.get(["memories", state.user], "last");
    return {
      profile: (profile?.value.name as string | undefined) ?? null,
      seen: (last?.value.note as string | undefined) ?? null,
      same: store === config.store,
    };
  })
  .addNode("tally", async (state, runtime: { store?: LangGraphRunnableConfig["store"] }) => {
    const items = await runtime.store!.search(["memories", state.user]);
    return { count: items.length };
  })
  .addEdge(START, "write")
  .addEdge("write", "read")
  .addEdge("read", "tally")
  .addEdge("tally", END)
  .compile();
graph.name = "store";
