/**
 * `factory`: exported as a factory `(config) => graph`, called for every run with the run's
 * config. The node `agent` replies `<prefix>: <last human text>` (id `ai-<n>`), where prefix is
 * `config.configurable.prefix` at the time the graph was made (default `factory`).
 */
import { AIMessage } from "@langchain/core/messages";
import type { RunnableConfig } from "@langchain/core/runnables";
import { END, START, MessagesValue, StateGraph, StateSchema } from "@langchain/langgraph";
import { contentText } from "../../src/graphs/agent.js";

const State = new StateSchema({ messages: MessagesValue });

export function graph(config: RunnableConfig) {
  const configured = config.configurable?.prefix;
  const prefix = typeof configured === "string" ? configured : "factory";
  const compiled = new StateGraph(State)
    .addNode("agent", (state): Partial<typeof State.State> => {
      const lastHuman = [...state.messages].reverse().find((m) => m.getType() === "human");
      return {
        messages: [new AIMessage({ id: `ai-${state.messages.length}`, content: `${prefix}: ${contentText(lastHuman?.content)}` })],
      };
    })
    .addEdge(START, "agent")
    .addEdge("agent", END)
    .compile();
  compiled.name = "factory";
  return compiled;
}
