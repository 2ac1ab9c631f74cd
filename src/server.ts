import type { FastifyInstance } from "fastify";
import type { Config } from "./config.js";
import { openStore } from "./eventstore/open.js";
import { withSchemas } from "./eventstore/validating.js";
import type { EventStore } from "./eventstore/types.js";
import type { SqliteEventStore } from "./eventstore/sqlite.js";
import { openReadModels, READ_MODELS_FILE, type ReadModels } from "./read-models/all.js";
import { LiveFeed } from "./eventstore/live-feed.js";
import { LogHealth } from "./eventstore/log-health.js";
import { recordingPositions } from "./eventstore/attributing-store.js";
import { logPositionHooks } from "./http/log-position.js";
import { durableResponses } from "./http/durable-responses.js";
import { rmSync } from "node:fs";
import path from "node:path";
import { STEP_EVENT_TYPES, schemaForEventType } from "./domain/events.js";
import { buildHttpApp } from "./http/app.js";
import { authenticatedCallerOf, callerOf } from "./http/auth.js";
import { metaRoutes } from "./http/routes/meta.js";
import { uiRoutes } from "./http/routes/ui.js";
import { assistantRoutes } from "./http/routes/assistants.js";
import { threadRoutes } from "./http/routes/threads.js";
import { threadStateRoutes } from "./http/routes/thread-state.js";
import { loadLanggraphConfig, parseLanggraphConfigEnv, type LoadedLanggraphConfig } from "./langgraph-config.js";
import { GraphCatalogue } from "./runtime/graph-catalogue.js";
import { LazyGraphRuntime, type GraphRuntime } from "./runtime/lazy-graph-runtime.js";
import type { RunWorker } from "./runtime/worker.js";
import type { GraphReloadOutcome } from "./runtime/graph-watch.js";
import { TypeSchemaReader } from "./runtime/type-schemas/reader.js";
import { bundleUi } from "./runtime/ui-bundles.js";
import type { AppContext } from "./app/context.js";
import { isoNow } from "./util/time.js";
import { ensureDefaultAssistants } from "./app/assistants.js";
import { threadLifecycle } from "./app/thread-lifecycle.js";
import { LANGGRAPH_JS_VERSION } from "./version.js";
import { RunsService } from "./app/runs.js";
import { runRoutes } from "./http/routes/runs.js";
import { threadStreamRoutes } from "./http/routes/thread-stream.js";
import { loadAuth } from "./app/auth/load.js";
import { a2aRoutes } from "./a2a/routes.js";
import { mcpRoutes } from "./mcp/routes.js";
import { protocolRoutes } from "./protocol/routes.js";
import { a2aPushBody } from "./a2a/push-body.js";
import { CronsService } from "./app/crons.js";
import { cronRoutes } from "./http/routes/crons.js";
import { webhookRoutes } from "./http/routes/webhooks.js";
import { CronScheduler } from "./app/cron-scheduler.js";
import { systemClock, type Clock } from "./context/clock.js";
import { WebhookDispatcher, type DispatcherOptions } from "./webhooks/dispatcher.js";
import { threadedSender } from "./webhooks/threaded-sender.js";
import { undiciSender } from "./webhooks/sender.js";
import type { Resolver } from "./webhooks/url-policy.js";
import { webhookUrlPolicyFor } from "./webhooks/mode-policy.js";
import { resolveWebhookHeaders } from "./langgraph-config.js";
import { ServerMetrics, metricsRoutes } from "./http/metrics.js";
import { auditRoutes } from "./http/routes/audit.js";
import { quarantineRoutes } from "./http/routes/quarantine.js";
import { TtlSweeper } from "./app/ttl-sweeper.js";
import { requestContextOf } from "./http/actor.js";
import { StoreService } from "./app/store.js";
import { loadStoreIndex } from "./runtime/store-index.js";
import { StoreSweeper } from "./app/store-sweeper.js";
import { storeRoutes } from "./http/routes/store.js";
import { internalRoutes } from "./http/routes/internal.js";
import { bindLoopbackFetch, loadCustomApp } from "./http/custom-app.js";
import { normalizeMountPrefix } from "./http/mount-prefix.js";
import { ResourceStack } from "./util/resource-stack.js";
import { ulid } from "ulid";
import { IdleMemory } from "./util/idle-memory.js";
import { StartupTimeline } from "./util/startup-timeline.js";

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

function describeListenError(error: unknown, config: Config): Error {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === "EADDRINUSE") return new Error(`port ${config.port} on ${config.host} is already in use`);
  if (code === "EACCES") return new Error(`no permission to listen on ${config.host}:${config.port}`);
  if (code === "EADDRNOTAVAIL") return new Error(`address ${config.host} is not available on this machine`);
  return error instanceof Error ? error : new Error(String(error));
}

/** What tests may replace: the clock (cron ticks, thread and store-item TTLs), the webhook DNS resolver. */
export interface ServerDeps {
  clock?: Clock;
  resolver?: Resolver;
  /** Awaited before the graph runtime loads (tests hold it back to see the server answer without it). */
  beforeGraphRuntime?: () => Promise<void>;
  /** Told of each reload of the graphs (config.watch), after its line is printed. */
  onGraphReload?: (outcome: GraphReloadOutcome) => void;
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
 * Builds the parts, each registered on `parts` right after it is built, so that they close in
 * the reverse order: the cron scheduler and sweepers, the webhooks, the run worker, the open
 * streams and HTTP, then the read models and the log.
 */
async function startParts(config: Config, deps: ServerDeps, parts: ResourceStack): Promise<RunningServer> {
  const startup = new StartupTimeline();
  startup.mark("modules");
  // Configuration first: a bad langgraph.json fails before anything is opened.
  const langgraph = await loadLanggraphConfig(config.langgraphJsonPath);
  // Schemas from the graph files' types: read in a worker thread when first asked, cached in DATA_DIR.
  // Its passes are ended before HTTP's close (see below), which waits for the requests awaiting them.
  const typeSchemas = new TypeSchemaReader({
    cacheDir: path.join(config.dataDir, "type-schemas"),
    timeoutMs: config.schemaResolveTimeoutMs,
    log: (m) => console.error(m),
  });
  // The graphs as langgraph.json names them; their files (and LangGraph) are loaded after the server listens.
  // LANGGRAPH_CONFIG may come from langgraph.json's `env` too (the environment wins, as for every variable).
  const graphs = new GraphCatalogue(
    langgraph.config.graphs,
    langgraph.baseDir,
    parseLanggraphConfigEnv(config.langgraphConfig ?? langgraph.env.LANGGRAPH_CONFIG),
  );
  // A configured auth that cannot be loaded stops the start: never serve open by accident.
  const auth = await loadAuth(langgraph.config.auth, langgraph.baseDir, path.basename(langgraph.configPath));
  const storeIndex = await loadStoreIndex(langgraph.config.store?.index, langgraph.baseDir, path.basename(langgraph.configPath));
  const metrics = new ServerMetrics(startup);
  const httpConfig = langgraph.config.http;
  const customApp = httpConfig.app ? await loadCustomApp(httpConfig.app, langgraph.baseDir) : undefined;
  // Generative UI components, bundled before HTTP listens (a file that cannot be bundled stops the start).
  const uiBundles =
    langgraph.config.ui && !httpConfig.disable_ui
      ? await bundleUi(langgraph.config.ui, { cwd: langgraph.baseDir, shared: langgraph.config.ui_config?.shared })
      : undefined;
  // The injected clock drives cron ticks and TTLs. The log's timestamps (ctx.now) are the system's,
  // and leases, retries and delayed starts are compared with them: the worker and the webhooks keep that clock.
  startup.mark("configuration");
  const clock = deps.clock ?? systemClock;
  const logClock = systemClock;
  const logHealth = new LogHealth();
  const log = await openStore({ ...config, health: logHealth });
  if (log.kind === "sqlite") {
    const embedded = log as SqliteEventStore;
    metrics.walSyncs = () => {
      const stats = embedded.stats();
      return { count: stats.walSyncs, seconds: stats.walSyncSeconds };
    };
  }
  const store = parts.use(
    "event store",
    recordingPositions(withSchemas(log, schemaForEventType, config.eventSchemaChecks === "all" ? undefined : STEP_EVENT_TYPES), metrics.onAppend),
    (s) => s.close(),
  );
  startup.mark("event store");
  const readModels = parts.use("read models", await openReadModelsFor(store, config.dataDir), (m) => m.runner.close());
  await readModels.runner.start(store, { health: logHealth, waitDeadlineMs: config.eventstoreDeadlineMs });
  startup.mark("read models");
  // With a shared store, other processes append checkpoints too: the cache follows them live.
  // A SQLite store belongs to this process alone, whose own appends keep the cache current.
  const liveCheckpoints =
    store.kind === "sqlite"
      ? undefined
      : parts.use(
          "live checkpoint feed",
          new LiveFeed(store, { streamPrefixes: ["checkpoints-"] }, "checkpoints-live", (event, error) =>
            readModels.runner.quarantine.tryRecord("checkpoints-live", event, error),
          ),
          (f) => f.close(),
        );
  let graphsReady = false;
  const runtime = new LazyGraphRuntime(async () => {
    await deps.beforeGraphRuntime?.();
    const { loadGraphRuntime } = await import("./runtime/graph-runtime.js");
    const loaded = await loadGraphRuntime({
      catalogue: graphs,
      baseDir: langgraph.baseDir,
      typeSchemas,
      logLevel: config.logLevel,
      checkpointer: {
        store,
        live: liveCheckpoints,
        cacheThreads: config.checkpointCacheThreads,
        cacheBytes: config.checkpointCacheBytes,
        metadataFromConfig: true,
      },
    });
    startup.mark("graph runtime");
    return loaded;
  });
  parts.defer("checkpointer", async () => (await runtime.ifStarted())?.checkpointer.close());
  const ctx: AppContext = { config, langgraph, store, readModels, graphs, runtime: () => runtime.get(), now: isoNow };
  await ensureDefaultAssistants(ctx, graphs.defaultAssistants());
  startup.mark("default assistants");
  const lifecycle = threadLifecycle(ctx);
  metrics.observe(store, readModels, logHealth);
  const completion = {
    store,
    readModels,
    now: ctx.now,
    deleteThreadCheckpoints: async (id: string) => (await runtime.get()).checkpointer.deleteThread(id),
    discardCheckpointsAfter: async (threadId: string, after: string | null, reason: string) =>
      void (await (await runtime.get()).checkpointer.discardAfter(threadId, after, reason)),
  };
  const runs = new RunsService(ctx, completion);
  const crons = new CronsService(ctx, runs, clock);
  const webhooksEnabled = !langgraph.config.http.disable_webhooks;
  // Resolved now: a header naming an unset variable stops start-up with one clear line.
  const webhookHeaders = webhooksEnabled ? resolveWebhookHeaders(langgraph.config.webhooks) : {};
  lifecycle.onDelete((threadId) => runs.cancelThreadRuns(threadId));
  const storeTtl = langgraph.config.store?.ttl;
  const storeService = new StoreService({
    store,
    readModels,
    clock,
    index: storeIndex,
    refreshOnRead: storeTtl?.refresh_on_read,
    defaultTtl: storeTtl?.default_ttl,
  });
  const http = parts.use(
    "HTTP server",
    await buildHttpApp({
      bodyLimit: config.bodyLimit,
      apiKey: config.apiKey,
      logLevel: config.logLevel,
      cors: langgraph.config.http.cors,
      auth,
      hooks: [
        logPositionHooks(readModels.runner, (request) => requestContextOf(request, config.apiKey !== undefined)),
        durableResponses(() => store.whenDurable()),
      ],
      customApp,
      mountPrefix: httpConfig.mount_prefix,
      // `http.disable_*` leave a group of built-in routes out, as the official servers do.
      routes: [
        ...(httpConfig.disable_meta
          ? []
          : [
              metaRoutes({
                storeKind: store.kind,
                langgraphJsVersion: LANGGRAPH_JS_VERSION,
                webhooksEnabled,
                positions: async () => ({
                  head: await store.headPosition(),
                  projections: readModels.runner.tables.map((t) => ({ name: t.name, position: readModels.runner.position })),
                }),
                health: logHealth,
                checkLog: () => store.headPosition(),
                graphRuntime: () => (graphsReady ? "ready" : "loading"),
                quarantine: () => readModels.runner.quarantine.summary(),
              }),
              metricsRoutes(metrics),
            ]),
        ...(httpConfig.disable_assistants ? [] : [assistantRoutes(ctx, lifecycle)]),
        ...(httpConfig.disable_threads
          ? []
          : [
              threadRoutes(ctx, lifecycle),
              threadStreamRoutes(ctx, lifecycle, (end) => runs.track(end), metrics),
              threadStateRoutes(ctx),
              auditRoutes(ctx),
              quarantineRoutes(ctx),
            ]),
        ...(httpConfig.disable_runs ? [] : [runRoutes(ctx, runs, metrics), cronRoutes(ctx, crons), webhookRoutes(ctx)]),
        ...(httpConfig.disable_a2a ? [] : [a2aRoutes(ctx, runs, { publicUrl: config.publicUrl, callerOf, cardCallerOf: authenticatedCallerOf })]),
        ...(httpConfig.disable_mcp ? [] : [mcpRoutes(ctx, runs, { callerOf })]),
        // The thread streaming protocol (v2) of useStream / ThreadStream: runs and threads, so with them.
        ...(httpConfig.disable_runs || httpConfig.disable_threads ? [] : [protocolRoutes(ctx, runs, { callerOf })]),
        ...(httpConfig.disable_store ? [] : [storeRoutes(storeService)]),
        ...(uiBundles ? [uiRoutes(uiBundles, { mountPrefix: normalizeMountPrefix(httpConfig.mount_prefix) })] : []),
        ...(config.devMode ? [internalRoutes({ ctx, lifecycle, runs, store: storeService })] : []),
      ],
    }),
    (app) => app.close(),
  );
  // HTTP's close waits for open connections: RunsService.close ends the run streams and waits
  // held open, so it is registered after HTTP, to run before it (it holds nothing else to release).
  startup.mark("http routes");
  parts.defer("run streams", () => runs.close());
  // Likewise a schema request waiting for a TypeScript pass: ended, it answers what the runtime tells.
  parts.defer("type schema passes", () => typeSchemas.close());
  // The SDK's Client without apiUrl (in custom routes and graphs) calls this server in-process.
  parts.defer("loopback fetch", bindLoopbackFetch(http, normalizeMountPrefix(httpConfig.mount_prefix)));
  // Built once HTTP is (it logs there), to stop before HTTP closes.
  const storeSweeper = parts.use("store sweeper", new StoreSweeper({ store, readModels, clock, log: (m) => http.log.error(m) }), (s) => s.stop());
  storeSweeper.start();
  try {
    await http.listen({ host: config.host, port: config.port });
  } catch (error) {
    throw describeListenError(error, config);
  }
  startup.mark("listening");
  // The graph runtime loads now, in the background; the run worker starts once it has (runs queued
  // meanwhile wait in the log, as they would for a free slot). Requests that need a graph await it.
  let worker: RunWorker | undefined;
  // The worker's identity in the claims it appends is known now (/metrics names it before the worker runs).
  const workerOwner = `worker-${ulid()}`;
  metrics.claimOwners.run = workerOwner;
  metrics.claims.run = () => ({ won: worker?.stats.claimed ?? 0, lost: worker?.stats.lost ?? 0 });
  metrics.runsExecuting = () => worker?.running ?? 0;
  const ready = (async () => {
    const [{ graphs: loaded, checkpointer }, { RunWorker }, { EventSourcedStore }] = await Promise.all([
      runtime.get(),
      import("./runtime/worker.js"),
      import("./app/graph-store.js"),
    ]);
    if (parts.isClosing) return;
    worker = new RunWorker({
      ...completion,
      owner: workerOwner,
      graphs: loaded,
      checkpointer,
      maxConcurrentRuns: config.maxConcurrentRuns,
      runTimeoutMs: config.runTimeoutSecs * 1000,
      leaseMs: config.runLeaseSecs * 1000,
      exclusiveStore: store.kind === "sqlite",
      storeFor: (run) => new EventSourcedStore(storeService, { run_id: run.run_id, thread_id: run.thread_id }),
      clock: logClock,
    });
    await worker.start();
    const started = worker;
    // A run enqueued at its thread's head is claimed at once, in an append that depends on the enqueue (see RunsService.onHeadEnqueued).
    // (A stopped worker declines offers: nothing to undo at shutdown.)
    runs.onHeadEnqueued((run, enqueued) => started.offer(run, enqueued));
    graphsReady = true;
    startup.mark("run worker");
    if (config.watch) {
      const { GraphWatcher } = await import("./runtime/graph-watch.js");
      if (parts.isClosing) return;
      const watcher = parts.use(
        "graph watcher",
        new GraphWatcher({ registry: loaded, configPath: langgraph.configPath, env: langgraph.env, onReload: deps.onGraphReload }),
        (w) => w.close(),
      );
      await watcher.start();
    }
  })();
  // Handled here too, so that a caller who never awaits `ready` gets no unhandled rejection (main.ts reports it).
  ready.catch(() => undefined);
  parts.defer("run worker", async () => {
    await ready.catch(() => undefined);
    await worker?.stop();
  });
  const address = http.server.address();
  const port = typeof address === "object" && address ? address.port : config.port;
  const url = `http://${config.host.includes(":") ? `[${config.host}]` : config.host}:${port}`;
  const webhooks = webhooksEnabled
    ? startWebhooks(
        { config, deps, langgraph, metrics, store, readModels, headers: webhookHeaders, selfUrl: url, pushBody: a2aPushBody(ctx, runs), clock: logClock },
        parts,
      )
    : undefined;
  const scheduler = parts.use(
    "cron scheduler",
    new CronScheduler({
      store,
      readModels,
      startRun: (cron, tick) => crons.startRun(cron, tick),
      clock,
      catchUpMs: config.cronCatchUpSecs === null ? null : config.cronCatchUpSecs * 1000,
      log: (m) => console.error(m),
    }),
    (s) => s.stop(),
  );
  scheduler.start();
  metrics.claims.cron = () => ({ won: scheduler.stats.fired, lost: scheduler.stats.lost });
  metrics.claimOwners.cron = scheduler.owner;
  // After a burst, the heap it grew to is given back once the process idles (V8 alone keeps it).
  const idleMemory = parts.use(
    "idle memory",
    new IdleMemory({ release: [() => readModels.runner.db.pragma("shrink_memory")], log: (m) => console.error(m) }),
    (m) => m.stop(),
  );
  idleMemory.start();
  const ttlSweeper = parts.use("thread TTL sweeper", new TtlSweeper({ ctx, lifecycle, clock, log: (m) => console.error(m) }), (s) => s.stop());
  ttlSweeper.start();
  startup.mark("schedulers");
  return {
    url,
    port,
    storeKind: store.kind,
    store,
    readModels,
    runtime: () => runtime.get(),
    ready,
    http,
    webhooks,
    crons: scheduler,
    metrics,
    ttlSweeper,
    typeSchemas,
    close: () => parts.close(),
  };
}

/** The webhook sender and its dispatcher, registered on `parts` (the dispatcher closes first). */
function startWebhooks(
  o: {
    config: Config;
    deps: ServerDeps;
    langgraph: LoadedLanggraphConfig;
    metrics: ServerMetrics;
    store: EventStore;
    readModels: ReadModels;
    headers: Record<string, string>;
    selfUrl: string;
    pushBody: DispatcherOptions["pushBody"];
    clock: Clock;
  },
  parts: ResourceStack,
): WebhookDispatcher {
  const w = o.config.webhooks;
  const policy = webhookUrlPolicyFor(o.langgraph.config.webhooks.url, o.config.devMode);
  const sendOptions = { connectTimeoutMs: w.connectTimeoutMs, totalTimeoutMs: w.timeoutMs, policy, connections: w.concurrency };
  // A resolver injected (tests) lives in this thread; otherwise the sender has a thread of its own.
  const sender = parts.use("webhook sender", o.deps.resolver ? undiciSender({ ...sendOptions, resolver: o.deps.resolver }) : threadedSender(sendOptions), (s) =>
    s.close(),
  );
  const dispatcher = parts.use(
    "webhook dispatcher",
    new WebhookDispatcher({
      store: o.store,
      readModels: o.readModels,
      policy,
      retry: { maxAttempts: w.maxAttempts, baseMs: w.retryBaseMs, maxDelayMs: w.retryMaxMs },
      send: sender.send,
      headers: o.headers,
      secret: w.secret,
      allowedFields: o.langgraph.config.webhooks.allowed_fields,
      concurrency: w.concurrency,
      // One attempt lasts at most the total timeout; the lease outlives it.
      leaseMs: w.leaseMs,
      exclusiveStore: o.store.kind === "sqlite",
      selfUrl: () => o.selfUrl,
      resolver: o.deps.resolver,
      clock: o.clock,
      log: (m) => console.error(m),
      onAttempt: o.metrics.onWebhookAttempt,
      pushBody: o.pushBody,
    }),
    (d) => d.stop(),
  );
  o.metrics.webhooksInFlight = () => dispatcher.inFlight;
  o.metrics.claims.webhook = () => ({ won: dispatcher.stats.claimed, lost: dispatcher.stats.lost });
  o.metrics.claimOwners.webhook = dispatcher.owner;
  dispatcher.start();
  return dispatcher;
}

/**
 * Opens DATA_DIR/read-models.sqlite. A database ahead of the log (the log was replaced or
 * truncated) cannot be trusted: it is removed and rebuilt from the log.
 */
async function openReadModelsFor(store: EventStore, dataDir: string): Promise<ReadModels> {
  const models = openReadModels(dataDir);
  if (models.runner.position <= (await store.headPosition())) return models;
  models.runner.db.close();
  for (const suffix of ["", "-wal", "-shm"]) rmSync(path.join(dataDir, READ_MODELS_FILE) + suffix, { force: true });
  return openReadModels(dataDir);
}
