/**
 * Schema graphs in zod. `zod4`: zod v4 state with LangGraph registry metadata (`withLangGraph`,
 * `jsonSchemaExtra`), a context schema, and a zod subgraph `inner`. `zod3`: zod v3 state, no
 * registry. Neither is meant to be run.
 */
import { z } from "zod";
import { z as z3 } from "zod/v3";
import { END, START, StateGraph } from "@langchain/langgraph";
import { withLangGraph } from "@langchain/langgraph/zod";

const State = z.object({
  items: withLangGraph(z.array(z.string()), {
    reducer: { schema: z.string(), fn: (a: string[], b: string) => [...a, b] },
    default: () => [],
    jsonSchemaExtra: { langgraph_type: "messages", title: "Items" },
  }),
  count: z.number().default(0),
  status: z.enum(["idle", "busy"]).default("idle"),
});
const Context = z.object({ model: z.string().describe("The model to call") });

const inner = new StateGraph(z.object({ inner_note: z.string() }))
  .addNode("note", () => ({ inner_note: "noted" }))
  .addEdge(START, "note")
  .addEdge("note", END)
  .compile();

export const zod4 = new StateGraph(State, Context)
  .addNode("inner", inner)
  .addNode("tick", (s) => ({ count: s.count + 1 }))
  .addEdge(START, "tick")
  .addEdge("tick", "inner")
  .addEdge("inner", END)
  .compile();

export const zod3 = new StateGraph(z3.object({ question: z3.string(), answer: z3.string().optional() }))
  .addNode("reply", (s) => ({ answer: `re: ${s.question}` }))
  .addEdge(START, "reply")
  .addEdge("reply", END)
  .compile();
