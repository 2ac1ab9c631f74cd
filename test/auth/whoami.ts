/** `whoami`: replies with what the run's config tells the graph about the authenticated user. */
import { AIMessage } from "@langchain/core/messages";
import type { RunnableConfig } from "@langchain/core/runnables";
import { END, START, MessagesValue, StateGraph, StateSchema } from "@langchain/langgraph";

const State = new StateSchema({ messages: MessagesValue });

export const graph = new StateGraph(State)
  .addNode("agent", (_state, config: RunnableConfig): Partial<typeof State.State> => {
    const c = config.configurable ?? {};
    const seen = { user: c.langgraph_auth_user, user_id: c.langgraph_auth_user_id, permissions: c.langgraph_auth_permissions };
    return { messages: [new AIMessage({ id: "whoami", content: JSON.stringify(seen) })] };
  })
  .addEdge(START, "agent")
  .addEdge("agent", END)
  .compile();
