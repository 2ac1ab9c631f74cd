/** `greeter`: a graph with a context schema; its node greets the context's `user_name` by the last message. */
import { END, START, MessagesValue, StateGraph, StateSchema, type LangGraphRunnableConfig } from "@langchain/langgraph";
import { AIMessage } from "@langchain/core/messages";
import { z } from "zod";

const State = new StateSchema({ messages: MessagesValue });
const Context = z.object({ user_name: z.string().describe("Who is greeted") });

export const graph = new StateGraph(State, Context)
  .addNode("greet", (state: typeof State.State, config: LangGraphRunnableConfig<z.infer<typeof Context>>) => {
    const last = state.messages.at(-1)?.content ?? "";
    return { messages: [new AIMessage({ id: "greeting", content: `Hello ${config.context?.user_name ?? "stranger"}: ${String(last)}` })] };
  })
  .addEdge(START, "greet")
  .addEdge("greet", END)
  .compile();
graph.name = "greeter";
