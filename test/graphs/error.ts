/** `error`: the node `agent` always throws `CustomError("Boo!")`. */
import { END, START, MessagesValue, StateGraph, StateSchema } from "@langchain/langgraph";

export class CustomError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CustomError";
  }
}

const State = new StateSchema({ messages: MessagesValue });

export const graph = new StateGraph(State)
  .addNode("agent", (): Partial<typeof State.State> => {
    throw new CustomError("Boo!");
  })
  .addEdge(START, "agent")
  .addEdge("agent", END)
  .compile();
graph.name = "error";
