/**
 * The graph runtime: LangGraph and LangChain core, the graphs of langgraph.json, the event-sourced
 * checkpointer. The server's assembly imports this module (and the run worker) after it listens:
 * LangGraph's modules (several hundred ES modules, which Node 20 compiles anew at every start) take
 * about half a second to load, while nothing the server answers before a graph is needed
 * (assistants, threads, queued runs, crons, the Store) depends on them.
 */
import type { TypeSchemaReader } from "./type-schemas/reader.js";
import type { GraphCatalogue } from "./graph-catalogue.js";
import type { GraphRuntime } from "./lazy-graph-runtime.js";
import { skipRunTreesUnlessTracing } from "./tracing.js";
import { drainBatchedStoresOnDemand } from "./batched-store.js";
import { registerSdkLogger } from "./sdk-logger.js";
import { loadGraphs } from "./graphs.js";
import { EventSourcedCheckpointSaver, type EventSourcedCheckpointSaverOptions } from "./checkpointer.js";

export interface GraphRuntimeOptions {
  catalogue: GraphCatalogue;
  /** The directory of langgraph.json (graph paths are relative to it). */
  baseDir: string;
  typeSchemas?: TypeSchemaReader;
  logLevel: string;
  checkpointer: EventSourcedCheckpointSaverOptions;
}

/** Loads LangGraph, then the graphs (in langgraph.json's order), and builds the checkpointer. */
export async function loadGraphRuntime(o: GraphRuntimeOptions): Promise<GraphRuntime> {
  skipRunTreesUnlessTracing(); // before any graph runs: no LangSmith RunTree per node unless tracing is configured
  drainBatchedStoresOnDemand(); // a run's store does not poll a timer for as long as the run lasts
  // Before any graph file is imported: graphs may call the SDK's getLogger() at top level.
  registerSdkLogger(o.logLevel);
  const graphs = await loadGraphs(o.catalogue, o.baseDir, o.typeSchemas);
  return { graphs, checkpointer: new EventSourcedCheckpointSaver(o.checkpointer) };
}
