/**
 * Graphs whose schemas only their TypeScript types tell (Annotation state, config and context),
 * copies of the official JS server's test graphs (`libs/langgraph-api/tests/graphs/`):
 * `nested` (nested.mts: Annotation subgraphs), `simple_runtime` (simple_runtime.mts: a context
 * annotation), `configured` (agent.mts's shape: an Annotation config schema).
 */
import type { BaseMessage } from "@langchain/core/messages";
import { Annotation, END, START, StateGraph, messagesStateReducer } from "@langchain/langgraph";

const child = new StateGraph(
  Annotation.Root({
    messages: Annotation<string[]>({ reducer: (a, b) => a.concat(b) }),
    child: Annotation<"child_one" | "child_two">,
  }),
)
  .addNode("c_one", () => ({ messages: ["Entered c_one node"] }))
  .addNode("c_two", () => ({ messages: ["Entered c_two node"] }))
  .addEdge(START, "c_one")
  .addEdge("c_one", "c_two")
  .addEdge("c_two", END);

const parent = new StateGraph(
  Annotation.Root({
    messages: Annotation<string[]>({ reducer: (a, b) => a.concat(b) }),
    parent: Annotation<"parent_one" | "parent_two">,
  }),
)
  .addNode("p_one", () => ({ messages: ["Entered p_one node"] }))
  .addNode("p_two", child.compile())
  .addEdge(START, "p_one")
  .addEdge("p_one", "p_two")
  .addEdge("p_two", END);

const grandParent = new StateGraph(Annotation.Root({ messages: Annotation<string[]>({ reducer: (a, b) => a.concat(b) }) }))
  .addNode("gp_one", () => ({ messages: ["Entered gp_one node"] }))
  .addNode("gp_two", parent.compile())
  .addEdge(START, "gp_one")
  .addEdge("gp_one", "gp_two")
  .addEdge("gp_two", END);

export const nested = grandParent.compile();

export const simple_runtime = new StateGraph(
  Annotation.Root({
    message: Annotation<string>(),
    model: Annotation<"openai" | "anthropic" | "unknown">(),
  }),
  Annotation.Root({ model: Annotation<"openai" | "anthropic" | "unknown">() }),
)
  .addNode("use_context", (_, runtime) => ({ model: runtime.context?.model }))
  .addEdge(START, "use_context")
  .compile();

const ConfiguredState = Annotation.Root({
  messages: Annotation<BaseMessage[]>({ reducer: messagesStateReducer, default: () => [] }),
  sharedStateValue: Annotation<string | null>(),
});

export const configured = new StateGraph(ConfiguredState, Annotation.Root({ model_name: Annotation<string> }))
  .addNode("agent", () => ({ sharedStateValue: "done" }))
  .addEdge(START, "agent")
  .addEdge("agent", END)
  .compile();
