import type { Config } from "../config.js";
import type { EventStore } from "../eventstore/types.js";
import type { ReadModels } from "../read-models/all.js";
import type { GraphRegistry } from "../runtime/graphs.js";
import type { EventSourcedCheckpointSaver } from "../runtime/checkpointer.js";
import type { LoadedLanggraphConfig } from "../langgraph-config.js";

/** Everything a route or worker needs, passed explicitly (no module-level singletons). */
export interface AppContext {
  config: Config;
  /** The validated langgraph.json (graphs, http, webhooks). */
  langgraph: LoadedLanggraphConfig;
  store: EventStore;
  /** The indexed read models (DATA_DIR/read-models.sqlite) and their queries. */
  readModels: ReadModels;
  graphs: GraphRegistry;
  checkpointer: EventSourcedCheckpointSaver;
  /** ISO 8601 with UTC offset, the Python server's timestamp format. */
  now(): string;
}
