import type { FastifyInstance } from "fastify";
import type { Config } from "./config.js";
import type { EventStore } from "./eventstore/types.js";
import type { ReadModels } from "./read-models/all.js";
import type { GraphRuntime } from "./runtime/lazy-graph-runtime.js";
import type { TypeSchemaReader } from "./runtime/type-schemas/reader.js";
import type { WebhookDispatcher } from "./webhooks/dispatcher.js";
import type { CronScheduler } from "./app/cron-scheduler.js";
import type { TtlSweeper } from "./app/ttl-sweeper.js";
import { systemClock } from "./context/clock.js";
import { ServerMetrics } from "./http/metrics.js";
import { ResourceStack } from "./util/resource-stack.js";
import { StartupTimeline } from "./util/startup-timeline.js";
import type { Assembly, ServerDeps } from "./startup/assembly.js";
import { loadConfiguration } from "./startup/configuration.js";
import { openLog, startReadModels } from "./startup/log.js";
import { prepareGraphRuntime } from "./startup/graph-runtime.js";
import { startServices } from "./startup/services.js";
import { listen, startAcceptWatchers, startHttp } from "./startup/http.js";
import { startRunWorker } from "./startup/run-worker.js";
import { startWebhooks } from "./startup/webhooks.js";
import { startSchedulers, startStoreSweeper } from "./startup/schedulers.js";

export type { ServerDeps } from "./startup/assembly.js";

export interface RunningServer {
  url: string;
  port: number;
  storeKind: EventStore["kind"];
  store: EventStore;
  readModels: ReadModels;
  /** The loaded graphs and the LangGraph checkpointer (its cache holds recently used threads' checkpoints); loads them if not yet. */
  runtime(): Promise<GraphRuntime>;
  /**
   * Settles once the graph runtime is loaded and the run worker started, which happens after the server
   * listens (rejects when a graph cannot be loaded: main.ts then exits with that message).
   */
  ready: Promise<void>;
  /** Settles once the extra accepting descriptors (ACCEPTS_PER_TURN) are held, after `ready`: how many. */
  acceptDescriptors: Promise<number>;
  http: FastifyInstance;
  /** Sends webhooks (undefined when `http.disable_webhooks` is set). */
  webhooks: WebhookDispatcher | undefined;
  crons: CronScheduler;
  metrics: ServerMetrics;
  /** Deletes threads whose TTL ran out. */
  ttlSweeper: TtlSweeper;
  /** Reads schemas from graph files' TypeScript types (worker-thread passes, DATA_DIR cache). */
  typeSchemas: TypeSchemaReader;
  /** Stops accepting, finishes in-flight requests and appends, closes the store. */
  close(): Promise<void>;
}

/** Opens the log, folds it into the read models, and serves the API. */
export async function startServer(config: Config, deps: ServerDeps = {}): Promise<RunningServer> {
  // Every part is registered on this stack as it is built: close() and a failed start tear down the same way.
  const parts = new ResourceStack(
    (name, error) => console.error(`closing the ${name} failed: ${(error as Error).stack ?? String(error)}`),
    (name, ms) => console.error(`shutdown: still closing the ${name} after ${ms} ms`),
  );
  try {
    return await startParts(config, deps, parts);
  } catch (error) {
    await parts.close();
    throw error;
  }
}

/**
 * Builds the subsystems in order (src/startup/), each registered on `parts` right after it is built,
 * so that they close in the reverse order: the cron scheduler and sweepers, the webhooks, the run
 * worker, the open streams and HTTP, then the read models and the log.
 */
async function startParts(config: Config, deps: ServerDeps, parts: ResourceStack): Promise<RunningServer> {
  const startup = new StartupTimeline();
  startup.mark("modules");
  const configuration = await loadConfiguration(config);
  const metrics = new ServerMetrics(startup);
  startup.mark("configuration");
  const a: Assembly = { config, deps, parts, startup, metrics, clock: deps.clock ?? systemClock, logClock: systemClock };
  const log = await openLog(a);
  const readModels = await startReadModels(a, log);
  const graphRuntime = prepareGraphRuntime(a, configuration, log.store, readModels);
  const services = await startServices(a, configuration, log.store, readModels, graphRuntime);
  const http = await startHttp(a, configuration, log, readModels, graphRuntime, services);
  startStoreSweeper(a, log.store, readModels, http);
  const { url, port } = await listen(a, http);
  const ready = startRunWorker(a, configuration, log.store, graphRuntime, services);
  const acceptDescriptors = startAcceptWatchers(a, http, ready);
  const webhooks = startWebhooks(a, configuration, log.store, readModels, services, url);
  const { scheduler, ttlSweeper } = startSchedulers(a, log.store, readModels, services);
  return {
    url,
    port,
    storeKind: log.store.kind,
    store: log.store,
    readModels,
    runtime: () => graphRuntime.runtime.get(),
    ready,
    acceptDescriptors,
    http,
    webhooks,
    crons: scheduler,
    metrics,
    ttlSweeper,
    typeSchemas: configuration.typeSchemas,
    close: () => parts.close(),
  };
}
