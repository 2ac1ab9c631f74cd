/**
 * The server's start-up, one subsystem per function in this folder: each builds its part, registers it on the
 * `ResourceStack` right after building it, marks its phase on the `StartupTimeline`, and fills the slots of
 * `ServerMetrics` that read it. `startParts` in server.ts calls them in order. This folder is part of the
 * assembly layer: it may import every layer, and nothing below imports it.
 */
import type { Config } from "../config.js";
import type { Clock } from "../context/clock.js";
import type { ServerMetrics } from "../http/metrics.js";
import type { GraphReloadOutcome } from "../runtime/graph-watch.js";
import type { ResourceStack } from "../util/resource-stack.js";
import type { StartupTimeline } from "../util/startup-timeline.js";
import type { Resolver } from "../webhooks/url-policy.js";

/** What tests may replace: the clock (cron ticks, thread and store-item TTLs), the webhook DNS resolver. */
export interface ServerDeps {
  clock?: Clock;
  resolver?: Resolver;
  /** Awaited before the graph runtime loads (tests hold it back to see the server answer without it). */
  beforeGraphRuntime?: () => Promise<void>;
  /** Told of each reload of the graphs (config.watch), after its line is printed. */
  onGraphReload?: (outcome: GraphReloadOutcome) => void;
}

/** What every part is built with. */
export interface Assembly {
  config: Config;
  deps: ServerDeps;
  /** Closes the parts in the reverse order of their registration: the order of the calls is the close order. */
  parts: ResourceStack;
  startup: StartupTimeline;
  metrics: ServerMetrics;
  /** The injected clock: cron ticks and TTLs. */
  clock: Clock;
  /**
   * The log's timestamps (ctx.now) are the system's, and leases, retries and delayed starts are compared with
   * them: the run worker and the webhooks keep this clock.
   */
  logClock: Clock;
}
