import type { FastifyInstance } from "fastify";
import type { Config } from "./config.js";
import { openStore } from "./eventstore/open.js";
import { withSchemas } from "./eventstore/validating.js";
import type { EventStore } from "./eventstore/types.js";
import { openReadModels, READ_MODELS_FILE, type ReadModels } from "./read-models/all.js";
import { LiveFeed } from "./eventstore/live-feed.js";
import { LogHealth } from "./eventstore/log-health.js";
import { recordingPositions } from "./eventstore/attributing-store.js";
import { logPositionHooks } from "./http/log-position.js";
import { rmSync } from "node:fs";
import path from "node:path";
import { schemaForEventType } from "./domain/events.js";
import { buildHttpApp } from "./http/app.js";
import { callerOf } from "./http/auth.js";
import { metaRoutes } from "./http/routes/meta.js";
import { assistantRoutes } from "./http/routes/assistants.js";
import { threadRoutes } from "./http/routes/threads.js";
import { threadStateRoutes } from "./http/routes/thread-state.js";
import { loadLanggraphConfig, parseLanggraphConfigEnv } from "./langgraph-config.js";
import { loadGraphRegistry } from "./runtime/graphs.js";
import { EventSourcedCheckpointSaver } from "./runtime/checkpointer.js";
import type { AppContext } from "./app/context.js";
import { isoNow } from "./util/time.js";
import { ensureDefaultAssistants } from "./app/assistants.js";
import { threadLifecycle } from "./app/thread-lifecycle.js";
import { LANGGRAPH_JS_VERSION } from "./version.js";
import { RunsService } from "./app/runs.js";
import { runRoutes } from "./http/routes/runs.js";
import { RunWorker } from "./runtime/worker.js";
import { loadAuth } from "./app/auth/load.js";
import { skipRunTreesUnlessTracing } from "./runtime/tracing.js";
import { a2aRoutes } from "./a2a/routes.js";
import { a2aPushBody } from "./a2a/push-body.js";
import { CronsService } from "./app/crons.js";
import { cronRoutes } from "./http/routes/crons.js";
import { webhookRoutes } from "./http/routes/webhooks.js";
import { CronScheduler } from "./app/cron-scheduler.js";
import { systemClock, type Clock } from "./context/clock.js";
import { WebhookDispatcher } from "./webhooks/dispatcher.js";
import { threadedSender } from "./webhooks/threaded-sender.js";
import { undiciSender } from "./webhooks/sender.js";
import type { Resolver } from "./webhooks/url-policy.js";
import { webhookUrlPolicyFor } from "./webhooks/mode-policy.js";
import { resolveWebhookHeaders } from "./langgraph-config.js";
import { ServerMetrics, metricsRoutes } from "./http/metrics.js";
import { auditRoutes } from "./http/routes/audit.js";
import { TtlSweeper } from "./app/ttl-sweeper.js";
import { requestContextOf } from "./http/actor.js";
import { StoreService } from "./app/store.js";
import { loadStoreIndex } from "./runtime/store-index.js";
import { StoreSweeper } from "./app/store-sweeper.js";
import { EventSourcedStore } from "./app/graph-store.js";
import { storeRoutes } from "./http/routes/store.js";
import { internalRoutes } from "./http/routes/internal.js";
import { registerSdkLogger } from "./runtime/sdk-logger.js";
import { bindLoopbackFetch, loadCustomApp } from "./http/custom-app.js";
import { normalizeMountPrefix } from "./http/mount-prefix.js";

export interface RunningServer {
  url: string;
  port: number;
  storeKind: EventStore["kind"];
  store: EventStore;
  readModels: ReadModels;
  /** The LangGraph checkpointer (its cache holds recently used threads' checkpoints). */
  checkpointer: EventSourcedCheckpointSaver;
  http: FastifyInstance;
  /** Sends webhooks (undefined when `http.disable_webhooks` is set). */
  webhooks: WebhookDispatcher | undefined;
  crons: CronScheduler;
  metrics: ServerMetrics;
  /** Deletes threads whose TTL ran out. */
  ttlSweeper: TtlSweeper;
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
}

/** Opens the log, folds it into the read models, and serves the API. */
export async function startServer(config: Config, deps: ServerDeps = {}): Promise<RunningServer> {
  skipRunTreesUnlessTracing(); // before any graph runs: no LangSmith RunTree per node unless tracing is configured
  // Configuration and graphs first: a bad langgraph.json fails before anything is opened.
  const langgraph = await loadLanggraphConfig(config.langgraphJsonPath);
  // Before any graph file is imported: graphs may call the SDK's getLogger() at top level.
  registerSdkLogger(config.logLevel);
  const graphs = await loadGraphRegistry(langgraph.config, langgraph.baseDir, {
    graphDefaults: parseLanggraphConfigEnv(config.langgraphConfig),
  });
  // A configured auth that cannot be loaded stops the start: never serve open by accident.
  const auth = await loadAuth(langgraph.config.auth, langgraph.baseDir, path.basename(langgraph.configPath));
  const storeIndex = await loadStoreIndex(langgraph.config.store?.index, langgraph.baseDir, path.basename(langgraph.configPath));
  const clock = deps.clock ?? systemClock;
  const metrics = new ServerMetrics();
  const httpConfig = langgraph.config.http;
  const customApp = httpConfig.app ? await loadCustomApp(httpConfig.app, langgraph.baseDir) : undefined;
  const logHealth = new LogHealth();
  const store = recordingPositions(withSchemas(await openStore({ ...config, health: logHealth }), schemaForEventType), metrics.onAppend);
  let readModels: ReadModels | undefined;
  let liveCheckpoints: LiveFeed | undefined;
  let http: FastifyInstance | undefined;
  let worker: RunWorker | undefined;
  let storeSweeper: StoreSweeper | undefined;
  let unbindLoopback = () => {};
  let runs: RunsService | undefined;
  let dispatcher: WebhookDispatcher | undefined;
  let sender: ReturnType<typeof undiciSender> | undefined;
  let scheduler: CronScheduler | undefined;
  let sweeper: TtlSweeper | undefined;
  let checkpointer: EventSourcedCheckpointSaver;
  try {
    readModels = await openReadModelsFor(store, config.dataDir);
    await readModels.runner.start(store, { health: logHealth, waitDeadlineMs: config.eventstoreDeadlineMs });
    // With a shared store, other processes append checkpoints too: the cache follows them live.
    // A SQLite store belongs to this process alone, whose own appends keep the cache current.
    liveCheckpoints = store.kind === "sqlite" ? undefined : new LiveFeed(store, { streamPrefixes: ["checkpoints-"] }, "checkpoints-live");
    checkpointer = new EventSourcedCheckpointSaver({
      store, live: liveCheckpoints, cacheThreads: config.checkpointCacheThreads, cacheBytes: config.checkpointCacheBytes, metadataFromConfig: true,
    });
    const ctx: AppContext = { config, langgraph, store, readModels, graphs, checkpointer, now: isoNow };
    await ensureDefaultAssistants(ctx, graphs.defaultAssistants());
    const lifecycle = threadLifecycle(ctx);
    metrics.observe(store, readModels, logHealth);
    const models = readModels;
    const completion = {
      store, readModels, now: ctx.now,
      deleteThreadCheckpoints: (id: string) => checkpointer.deleteThread(id),
      discardCheckpointsAfter: async (threadId: string, after: string | null, reason: string) => void (await checkpointer.discardAfter(threadId, after, reason)),
    };
    runs = new RunsService(ctx, completion);
    const runService = runs;
    const crons = new CronsService(ctx, runs, clock);
    const webhooksEnabled = !langgraph.config.http.disable_webhooks;
    // Resolved now: a header naming an unset variable stops start-up with one clear line.
    const webhookHeaders = webhooksEnabled ? resolveWebhookHeaders(langgraph.config.webhooks) : {};
    lifecycle.onDelete((threadId) => runService.cancelThreadRuns(threadId));
    const storeTtl = langgraph.config.store?.ttl;
    const storeService = new StoreService({ store, readModels, clock, index: storeIndex, refreshOnRead: storeTtl?.refresh_on_read, defaultTtl: storeTtl?.default_ttl });
    storeSweeper = new StoreSweeper({ store, readModels, clock, onError: (error) => http?.log.error({ err: error }, "store TTL sweep failed") });
    storeSweeper.start();
    http = await buildHttpApp({
      bodyLimit: config.bodyLimit,
      apiKey: config.apiKey,
      logLevel: config.logLevel,
      cors: langgraph.config.http.cors,
      auth,
      hooks: [logPositionHooks(readModels.runner, (request) => requestContextOf(request, config.apiKey !== undefined))],
      customApp,
      mountPrefix: httpConfig.mount_prefix,
      // `http.disable_*` leave a group of built-in routes out, as the official servers do.
      routes: [
        ...(httpConfig.disable_meta ? [] : [
          metaRoutes({
            storeKind: store.kind, langgraphJsVersion: LANGGRAPH_JS_VERSION, webhooksEnabled,
            positions: async () => ({ head: await store.headPosition(), projections: models.runner.tables.map((t) => ({ name: t.name, position: models.runner.position })) }),
            health: logHealth, checkLog: () => store.headPosition(),
          }),
          metricsRoutes(metrics),
        ]),
        ...(httpConfig.disable_assistants ? [] : [assistantRoutes(ctx, lifecycle)]),
        ...(httpConfig.disable_threads ? [] : [threadRoutes(ctx, lifecycle), threadStateRoutes(ctx), auditRoutes(ctx)]),
        ...(httpConfig.disable_runs ? [] : [runRoutes(ctx, runs, metrics), cronRoutes(ctx, crons), webhookRoutes(ctx)]),
        ...(httpConfig.disable_a2a ? [] : [a2aRoutes(ctx, runs, { publicUrl: config.publicUrl, callerOf })]),
        ...(httpConfig.disable_store ? [] : [storeRoutes(storeService)]),
        ...(config.devMode ? [internalRoutes({ ctx, lifecycle, runs, store: storeService })] : []),
      ],
    });
    // The SDK's Client without apiUrl (in custom routes and graphs) calls this server in-process.
    unbindLoopback = bindLoopbackFetch(http, normalizeMountPrefix(httpConfig.mount_prefix));
    try {
      await http.listen({ host: config.host, port: config.port });
    } catch (error) {
      throw describeListenError(error, config);
    }
    worker = new RunWorker({
      ...completion,
      graphs,
      checkpointer,
      maxConcurrentRuns: config.maxConcurrentRuns,
      runTimeoutMs: config.runTimeoutSecs * 1000,
      leaseMs: config.runLeaseSecs * 1000,
      exclusiveStore: store.kind === "sqlite",
      storeFor: (run) => new EventSourcedStore(storeService, { run_id: run.run_id, thread_id: run.thread_id }),
    });
    await worker.start();
    const address = http.server.address();
    const selfUrl = typeof address === "object" && address ? `http://${config.host.includes(":") ? `[${config.host}]` : config.host}:${address.port}` : undefined;
    if (webhooksEnabled) {
      const w = config.webhooks;
      const policy = webhookUrlPolicyFor(langgraph.config.webhooks.url, config.devMode);
      const sendOptions = { connectTimeoutMs: w.connectTimeoutMs, totalTimeoutMs: w.timeoutMs, policy, connections: w.concurrency };
      // A resolver injected (tests) lives in this thread; otherwise the sender has a thread of its own.
      sender = deps.resolver ? undiciSender({ ...sendOptions, resolver: deps.resolver }) : threadedSender(sendOptions);
      dispatcher = new WebhookDispatcher({
        store,
        readModels: readModels.runner,
        policy,
        retry: { maxAttempts: w.maxAttempts, baseMs: w.retryBaseMs, maxDelayMs: w.retryMaxMs },
        send: sender.send,
        headers: webhookHeaders,
        secret: w.secret,
        allowedFields: langgraph.config.webhooks.allowed_fields,
        concurrency: w.concurrency,
        // One attempt lasts at most the total timeout; the lease outlives it.
        leaseMs: w.leaseMs,
        exclusiveStore: store.kind === "sqlite",
        selfUrl: () => selfUrl,
        resolver: deps.resolver,
        log: (m) => console.error(m),
        onAttempt: metrics.onWebhookAttempt,
        pushBody: a2aPushBody(ctx, runService),
      });
      const started = dispatcher;
      metrics.webhooksInFlight = () => started.inFlight;
      dispatcher.start();
    }
    scheduler = new CronScheduler({
      store,
      readModels: readModels.runner,
      startRun: (cron) => crons.startRun(cron),
      clock,
      catchUpMs: config.cronCatchUpSecs === null ? null : config.cronCatchUpSecs * 1000,
      log: (m) => console.error(m),
    });
    scheduler.start();
    sweeper = new TtlSweeper(ctx, lifecycle, clock);
    sweeper.start();
  } catch (error) {
    unbindLoopback();
    await sweeper?.stop().catch(() => undefined);
    await scheduler?.stop().catch(() => undefined);
    await dispatcher?.stop().catch(() => undefined);
    await sender?.close().catch(() => undefined);
    await http?.close().catch(() => undefined);
    await worker?.stop().catch(() => undefined);
    await storeSweeper?.stop().catch(() => undefined);
    runs?.close();
    await readModels?.runner.close().catch(() => undefined);
    await liveCheckpoints?.close().catch(() => undefined);
    await store.close().catch(() => undefined);
    throw error;
  }
  const address = http.server.address();
  const port = typeof address === "object" && address ? address.port : config.port;
  const app = http;
  const runWorker = worker!;
  const storeItemSweeper = storeSweeper!;
  const runService = runs!;
  const models = readModels!;
  const feed = liveCheckpoints;
  const webhookDispatcher = dispatcher;
  const webhookSender = sender;
  const cronScheduler = scheduler!;
  const ttlSweeper = sweeper!;
  let closing: Promise<void> | undefined;
  return {
    url: `http://${config.host.includes(":") ? `[${config.host}]` : config.host}:${port}`,
    port,
    storeKind: store.kind,
    store,
    readModels: models,
    checkpointer,
    http: app,
    webhooks: webhookDispatcher,
    crons: cronScheduler,
    metrics,
    ttlSweeper,
    close() {
      closing ??= (async () => {
        await ttlSweeper.stop();
        await cronScheduler.stop();
        await webhookDispatcher?.stop();
        await webhookSender?.close();
        await runWorker.stop();
        await storeItemSweeper.stop();
        unbindLoopback();
        runService.close();
        await app.close();
        await models.runner.close();
        await feed?.close();
        checkpointer.close();
        await store.close();
      })();
      return closing;
    },
  };
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
