import { AIMessage } from "@langchain/core/messages";
import type { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import { END, MessagesValue, START, StateGraph, StateSchema } from "@langchain/langgraph";

export const ChatState = new StateSchema({ messages: MessagesValue });

/** A tiny offline chat graph: node `reply` echoes the last message, with a stable id per turn. */
export function chatGraph(checkpointer: BaseCheckpointSaver) {
  return new StateGraph(ChatState)
    .addNode("reply", (state) => {
      const last = state.messages[state.messages.length - 1];
      return { messages: [new AIMessage({ id: `ai-${state.messages.length}`, content: `echo: ${String(last?.content)}` })] };
    })
    .addEdge(START, "reply")
    .addEdge("reply", END)
    .compile({ checkpointer });
}
