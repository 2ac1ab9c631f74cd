/**
 * `subgraph`: nested graphs, so `stream_subgraphs` yields namespaced events.
 *   parent:     START -> child (subgraph) -> parent -> END
 *   child:      START -> grandchild (subgraph) -> inner -> END
 *   grandchild: START -> deep -> END
 * Subgraph namespaces: `child`, `child|grandchild` (with recurse).
 * Replies: `deep` (id `deep-<n>`), `inner` (id `inner-<n>`), `parent` (id `ai-<n>`).
 */
import { AIMessage } from "@langchain/core/messages";
import { END, START, MessagesValue, StateGraph, StateSchema } from "@langchain/langgraph";

const State = new StateSchema({ messages: MessagesValue });
type S = typeof State.State;

const reply =
  (prefix: string, content: string) =>
  (state: S): Partial<S> => ({
    messages: [new AIMessage({ id: `${prefix}-${state.messages.length}`, content })],
  });

const grandchild = new StateGraph(State).addNode("deep", reply("deep", "from grandchild")).addEdge(START, "deep").addEdge("deep", END).compile();
grandchild.name = "grandchild";

const child = new StateGraph(State)
  .addNode("grandchild", grandchild)
  .addNode("inner", reply("inner", "from child"))
  .addEdge(START, "grandchild")
  .addEdge("grandchild", "inner")
  .addEdge("inner", END)
  .compile();
child.name = "child";

export const graph = new StateGraph(State)
  .addNode("child", child)
  .addNode("parent", reply("ai", "from parent"))
  .addEdge(START, "child")
  .addEdge("child", "parent")
  .addEdge("parent", END)
  .compile();
graph.name = "subgraph";
