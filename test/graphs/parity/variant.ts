/**
 * `variant`: a factory whose graph depends on the config in effect. With
 * `configurable.variant = "extended"` it has a second node `extra` (START -> base -> extra -> END);
 * otherwise only `base`. Each node appends its name to `visited`.
 */
import type { RunnableConfig } from "@langchain/core/runnables";
import { Annotation, END, START, StateGraph } from "@langchain/langgraph";

const State = Annotation.Root({
  visited: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
});

export function graph(config: RunnableConfig) {
  const extended = config.configurable?.variant === "extended";
  const builder = new StateGraph(State).addNode("base", () => ({ visited: ["base"] })).addEdge(START, "base");
  if (!extended) return builder.addEdge("base", END).compile();
  return builder
    .addNode("extra", () => ({ visited: ["extra"] }))
    .addEdge("base", "extra")
    .addEdge("extra", END)
    .compile();
}
