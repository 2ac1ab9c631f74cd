/**
 * The engine every benchmark compares the server with: the example graph `agent`, compiled in this process.
 * Loaded from a graph source (bench/support/project.ts): this repository's by default; the benchmarks that run
 * the server on `benchGraph()` (a project folder with its own LangGraph unless BENCH_GRAPH=repo) pass it, so that
 * both sides run the same copies of LangGraph.
 */
import { pathToFileURL } from "node:url";
import type { MemorySaver } from "@langchain/langgraph";
import { findPackage, packageEntryUrl } from "../../src/module-loader.js";
import { REPO_GRAPH, type GraphSource } from "./project.js";

export interface InProcessGraph {
  invoke(input: unknown, config?: unknown): Promise<unknown>;
}

interface AgentModule {
  builder: { compile(o: { checkpointer: MemorySaver }): InProcessGraph };
  graph: InProcessGraph;
}

/** The example graph's module (`builder`, `graph`) from `source`. */
export async function importAgentModule(source: GraphSource = REPO_GRAPH): Promise<AgentModule> {
  const { graphFile } = source;
  return (await import(pathToFileURL(graphFile).href)) as AgentModule;
}

/** A new `MemorySaver` of the LangGraph the graph source's graph runs on (the project's own copy, or this repository's). */
export async function newMemorySaver(source: GraphSource = REPO_GRAPH): Promise<MemorySaver> {
  const { graphFile } = source;
  const langgraph = findPackage("@langchain/langgraph", graphFile);
  const url = langgraph && packageEntryUrl(langgraph);
  if (!url) throw new Error(`no @langchain/langgraph found from ${graphFile}`);
  const { MemorySaver: Saver } = (await import(url)) as { MemorySaver: new () => MemorySaver };
  return new Saver();
}

/** The example graph compiled with `checkpointer` (a new in-memory `MemorySaver` of the graph's own LangGraph by default). */
export async function compileAgentGraph(checkpointer?: MemorySaver, source: GraphSource = REPO_GRAPH): Promise<InProcessGraph> {
  const { builder } = await importAgentModule(source);
  return builder.compile({ checkpointer: checkpointer ?? (await newMemorySaver(source)) });
}
