/**
 * `interrupt`: human in the loop. The node `ask` calls `interrupt({question: "Continue?"})`;
 * resuming with `Command({resume: <answer>})` makes it reply `You answered: <answer>` (JSON for
 * non-strings; id `ai-<n>`). Needs a checkpointer (the server's, or one set by a test).
 */
import { AIMessage } from "@langchain/core/messages";
import { END, START, MessagesValue, StateGraph, StateSchema, interrupt } from "@langchain/langgraph";

const State = new StateSchema({ messages: MessagesValue });

export const graph = new StateGraph(State)
  .addNode("ask", (state): Partial<typeof State.State> => {
    const answer: unknown = interrupt({ question: "Continue?" });
    const text = typeof answer === "string" ? answer : JSON.stringify(answer);
    return { messages: [new AIMessage({ id: `ai-${state.messages.length}`, content: `You answered: ${text}` })] };
  })
  .addEdge(START, "ask")
  .addEdge("ask", END)
  .compile();
graph.name = "interrupt";
