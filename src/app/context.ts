import type { Config } from "../config.js";
import type { EventStore } from "../eventstore/types.js";
import type { ProjectionRunner } from "../projections/runner.js";

/** What the routes need to know about the graphs (the registry in src/runtime provides it). */
export interface GraphCatalog {
  ids(): string[];
  has(id: string): boolean;
}

/** Everything a route or worker needs, passed explicitly (no module-level singletons). */
export interface AppContext {
  config: Config;
  store: EventStore;
  runner: ProjectionRunner;
  graphs: GraphCatalog;
  /** ISO 8601 with UTC offset, the Python server's timestamp format. */
  now(): string;
}

export const isoNow = () => new Date().toISOString().replace("Z", "+00:00");
