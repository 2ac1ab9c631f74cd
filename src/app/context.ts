import type { Config } from "../config.js";
import type { EventStore } from "../eventstore/types.js";
import type { CommandPipeline } from "../commands/pipeline.js";
import type { ReadModels } from "../read-models/all.js";
import type { GraphCatalogue } from "../runtime/graph-catalogue.js";
import type { GraphRuntime } from "../runtime/lazy-graph-runtime.js";
import type { LoadedLanggraphConfig } from "../langgraph-config.js";

/** Everything a route or worker needs, passed explicitly (no module-level singletons). */
export interface AppContext {
  config: Config;
  /** The validated langgraph.json (graphs, http, webhooks). */
  langgraph: LoadedLanggraphConfig;
  store: EventStore;
  /** The one way to append (src/commands/pipeline.ts). */
  commands: CommandPipeline;
  /** The indexed read models (DATA_DIR/read-models.sqlite) and their queries. */
  readModels: ReadModels;
  /** The graphs langgraph.json names (ids, descriptions, defaults): known before any graph is loaded. */
  graphs: GraphCatalogue;
  /** The loaded graphs and the checkpointer; the first call may wait for LangGraph to load (see graph-runtime.ts). */
  runtime(): Promise<GraphRuntime>;
  /** ISO 8601 with UTC offset, the Python server's timestamp format. */
  now(): string;
}
