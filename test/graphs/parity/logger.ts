/**
 * `logger`: uses the SDK's global logger, obtained at import time (fails to load without it),
 * and logs from its node (the server adds `langgraph_node`).
 */
import { getLogger } from "@langchain/langgraph-sdk/logging";
import { Annotation, END, START, StateGraph } from "@langchain/langgraph";

const logger = getLogger();
logger.info("logger graph imported");

const State = Annotation.Root({ said: Annotation<string> });

export const graph = new StateGraph(State)
  .addNode("speak", () => {
    logger.info("hello from a node", { marker: "parity-logger" });
    return { said: "logged" };
  })
  .addEdge(START, "speak")
  .addEdge("speak", END)
  .compile();
