/**
 * `parallel-interrupt`: two nodes in one step: `ask` calls `interrupt("Continue?")`, `jot` writes
 * `note: "noted"`. LangGraph emits the interrupt, then the state with `jot`'s write applied, as the
 * last `values` chunk: what the official servers answer a /wait with. Not in langgraph.json: a test
 * names it in a langgraph.json of its own (test/http/official-shapes.test.ts).
 */
import { END, START, StateGraph, StateSchema, interrupt } from "@langchain/langgraph";
import * as z from "zod";

const State = new StateSchema({ topic: z.string().optional(), note: z.string().optional(), answer: z.string().optional() });

export const graph = new StateGraph(State)
  .addNode("ask", () => ({ answer: String(interrupt("Continue?")) }))
  .addNode("jot", () => ({ note: "noted" }))
  .addEdge(START, "ask")
  .addEdge(START, "jot")
  .addEdge("ask", END)
  .addEdge("jot", END)
  .compile();
graph.name = "parallel-interrupt";
