/** `counter`: a graph without `messages` (A2A text parts are refused; data parts are its input). Adds `by` (default 1) to `count`. */
import { END, START, StateGraph, StateSchema } from "@langchain/langgraph";
import { z } from "zod";

const State = new StateSchema({ count: z.number().optional(), by: z.number().optional() });

export const graph = new StateGraph(State)
  .addNode("add", (state): Partial<typeof State.State> => ({ count: (state.count ?? 0) + (state.by ?? 1) }))
  .addEdge(START, "add")
  .addEdge("add", END)
  .compile();
graph.name = "counter";
