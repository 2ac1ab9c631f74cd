/**
 * `delay`: the node `wait` waits `delay` milliseconds, taken from the input (`{"delay": 500}`) or
 * else from `config.configurable.delay` (default 0), then replies `waited <ms>ms` (id `ai-<n>`).
 * The wait is a timer bound to the run's abort signal, so cancelling a run ends it at once.
 */
import { setTimeout as wait } from "node:timers/promises";
import { AIMessage } from "@langchain/core/messages";
import {
  END,
  type LangGraphRunnableConfig,
  MessagesValue,
  START,
  StateGraph,
  StateSchema,
} from "@langchain/langgraph";
import { z } from "zod";

const State = new StateSchema({
  messages: MessagesValue,
  delay: z.number().int().nonnegative().optional(),
});

function delayOf(state: typeof State.State, config: LangGraphRunnableConfig): number {
  if (typeof state.delay === "number") return state.delay;
  const configured = Number(config.configurable?.delay ?? 0);
  return Number.isFinite(configured) && configured > 0 ? configured : 0;
}

export const graph = new StateGraph(State)
  .addNode("wait", async (state, config): Promise<Partial<typeof State.State>> => {
    const ms = delayOf(state, config);
    if (ms > 0) await wait(ms, undefined, { signal: config.signal });
    return { messages: [new AIMessage({ id: `ai-${state.messages.length}`, content: `waited ${ms}ms` })] };
  })
  .addEdge(START, "wait")
  .addEdge("wait", END)
  .compile();
graph.name = "delay";
