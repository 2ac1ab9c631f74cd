/**
 * `nested_interrupt`: an interrupt inside a subgraph.
 *   parent: START -> child (subgraph) -> finish -> END
 *   child:  START -> ask (interrupt({question: "Which city?"}), answer into `city`) -> END
 * Values: `city` (the answer), `done` (true once `finish` ran).
 */
import { Annotation, END, START, StateGraph, interrupt } from "@langchain/langgraph";

const State = Annotation.Root({ city: Annotation<string>, done: Annotation<boolean> });

const child = new StateGraph(State)
  .addNode("ask", () => ({ city: String(interrupt({ question: "Which city?" })) }))
  .addEdge(START, "ask")
  .addEdge("ask", END)
  .compile();

export const graph = new StateGraph(State)
  .addNode("child", child)
  .addNode("finish", () => ({ done: true }))
  .addEdge(START, "child")
  .addEdge("child", "finish")
  .addEdge("finish", END)
  .compile();
