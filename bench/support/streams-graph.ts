/**
 * The token-streaming graph of the `streams` benchmark, as the source of a user's graph file: one node
 * calling a fake chat model (`FakeListChatModel` of @langchain/core/utils/testing), which answers with a
 * fixed text one character (one token) at a time, `sleepMs` apart: `tokens` × `sleepMs` of model time.
 * No LLM, no network. The same source runs on this server (in a project folder, bench/support/project.ts)
 * and on the official JS dev server (the anchor).
 */

/** The graph's name in langgraph.json. */
export const STREAMS_GRAPH_ID = "chat";

/** The model's answer: `tokens` characters (the fake model streams one character per chunk). */
export function streamsAnswer(tokens: number): string {
  const letters = "abcdefghijklmnopqrstuvwxyz";
  return Array.from({ length: tokens }, (_, i) => letters[i % letters.length]).join("");
}

/** The graph file (TypeScript, ESM) answering with `tokens` tokens, `sleepMs` apart. */
export function streamsGraphSource(tokens: number, sleepMs: number): string {
  return `// Made by bench/support/streams-graph.ts: one node calling a fake chat model (${tokens} tokens, ${sleepMs} ms apart).
import { FakeListChatModel } from "@langchain/core/utils/testing";
import { MessagesAnnotation, StateGraph } from "@langchain/langgraph";

const model = new FakeListChatModel({ responses: [${JSON.stringify(streamsAnswer(tokens))}], sleep: ${sleepMs} });

export const graph = new StateGraph(MessagesAnnotation)
  .addNode("model", async (state: typeof MessagesAnnotation.State) => ({ messages: [await model.invoke(state.messages)] }))
  .addEdge("__start__", "model")
  .addEdge("model", "__end__")
  .compile();
`;
}

/** A langgraph.json naming the graph file `graphFile` (relative to the file, e.g. "./src/chat.ts"). */
export function streamsLanggraphJson(graphFile: string): string {
  return JSON.stringify({ node_version: "20", graphs: { [STREAMS_GRAPH_ID]: `${graphFile}:graph` }, env: {} }, null, 2);
}
