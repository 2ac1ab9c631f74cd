/**
 * `custom`: the node `agent` writes two custom stream chunks through `config.writer`
 * (`{"progress": 1, "of": 2}`, `{"progress": 2, "of": 2}`) and then replies `done` (id `ai-<n>`).
 * Exported as a Promise of the compiled graph (an export kind the registry must accept).
 */
import { AIMessage } from "@langchain/core/messages";
import { END, START, MessagesValue, StateGraph, StateSchema } from "@langchain/langgraph";

const State = new StateSchema({ messages: MessagesValue });

async function build() {
  const compiled = new StateGraph(State)
    .addNode("agent", (state, config): Partial<typeof State.State> => {
      config.writer?.({ progress: 1, of: 2 });
      config.writer?.({ progress: 2, of: 2 });
      return { messages: [new AIMessage({ id: `ai-${state.messages.length}`, content: "done" })] };
    })
    .addEdge(START, "agent")
    .addEdge("agent", END)
    .compile();
  compiled.name = "custom";
  return compiled;
}

export const graph = build();
