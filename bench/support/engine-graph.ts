/** The engine every benchmark compares the server with: the example graph `agent`, compiled in this process. */
import path from "node:path";
import { pathToFileURL } from "node:url";
import { MemorySaver } from "@langchain/langgraph";
import { repoRoot } from "./server.js";

export interface InProcessGraph {
  invoke(input: unknown, config: unknown): Promise<unknown>;
}

/** src/graphs/agent.ts compiled with `checkpointer` (a new in-memory `MemorySaver` by default). */
export async function compileAgentGraph(checkpointer: MemorySaver = new MemorySaver()): Promise<InProcessGraph> {
  const { builder } = (await import(pathToFileURL(path.join(repoRoot, "src", "graphs", "agent.ts")).href)) as {
    builder: { compile(o: { checkpointer: MemorySaver }): InProcessGraph };
  };
  return builder.compile({ checkpointer });
}
