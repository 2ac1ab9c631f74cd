import type { FastifyInstance } from "fastify";
import type { Config } from "./config.js";
import { openStore } from "./eventstore/open.js";
import { withSchemas } from "./eventstore/validating.js";
import type { EventStore } from "./eventstore/types.js";
import { ProjectionRunner } from "./projections/runner.js";
import { allProjections } from "./projections/all.js";
import { schemaForEventType } from "./domain/events.js";
import { buildHttpApp } from "./http/app.js";
import { metaRoutes } from "./http/routes/meta.js";
import { assistantRoutes } from "./http/routes/assistants.js";
import { threadRoutes } from "./http/routes/threads.js";
import { threadStateRoutes } from "./http/routes/thread-state.js";
import { loadLanggraphConfig, parseLanggraphConfigEnv } from "./runtime/langgraph-config.js";
import { loadGraphRegistry } from "./runtime/graphs.js";
import { EventSourcedCheckpointSaver } from "./runtime/checkpointer.js";
import { isoNow, type AppContext } from "./app/context.js";
import { ensureDefaultAssistants } from "./app/assistants.js";
import { threadLifecycle } from "./app/thread-lifecycle.js";
import { LANGGRAPH_JS_VERSION } from "./version.js";
import { RunsService } from "./app/runs.js";
import { runRoutes } from "./http/routes/runs.js";
import { RunWorker } from "./runtime/worker.js";
import { skipRunTreesUnlessTracing } from "./runtime/tracing.js";

export interface RunningServer {
  url: string;
  port: number;
  storeKind: EventStore["kind"];
  store: EventStore;
  runner: ProjectionRunner;
  /** The LangGraph checkpointer (its cache holds recently used threads' checkpoints). */
  checkpointer: EventSourcedCheckpointSaver;
  http: FastifyInstance;
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

/** Opens the log, folds it into the read models, and serves the API. */
export async function startServer(config: Config): Promise<RunningServer> {
  skipRunTreesUnlessTracing(); // before any graph runs: no LangSmith RunTree per node unless tracing is configured
  // Configuration and graphs first: a bad langgraph.json fails before anything is opened.
  const langgraph = await loadLanggraphConfig(config.langgraphJsonPath);
  const graphs = await loadGraphRegistry(langgraph.config, langgraph.baseDir, {
    graphDefaults: parseLanggraphConfigEnv(config.langgraphConfig),
  });
  const store = withSchemas(await openStore(config), schemaForEventType);
  const runner = new ProjectionRunner(store, allProjections);
  let http: FastifyInstance | undefined;
  let worker: RunWorker | undefined;
  let runs: RunsService | undefined;
  let checkpointer: EventSourcedCheckpointSaver;
  try {
    await runner.start();
    // Created once history is folded: its cache follows only live events (other processes' appends).
    checkpointer = new EventSourcedCheckpointSaver({ store, live: runner, cacheThreads: config.checkpointCacheThreads });
    const ctx: AppContext = { config, langgraph, store, runner, graphs, checkpointer, now: isoNow };
    await ensureDefaultAssistants(ctx, graphs.defaultAssistants());
    const lifecycle = threadLifecycle(ctx);
    const completion = {
      store, runner, now: ctx.now,
      deleteThreadCheckpoints: (id: string) => checkpointer.deleteThread(id),
      discardCheckpointsAfter: async (threadId: string, after: string | null, reason: string) => void (await checkpointer.discardAfter(threadId, after, reason)),
    };
    runs = new RunsService(ctx, completion);
    const runService = runs;
    lifecycle.onDelete((threadId) => runService.cancelThreadRuns(threadId));
    http = await buildHttpApp({
      bodyLimit: config.bodyLimit,
      apiKey: config.apiKey,
      logLevel: config.logLevel,
      routes: [
        metaRoutes({ storeKind: store.kind, langgraphJsVersion: LANGGRAPH_JS_VERSION, webhooksEnabled: false }),
        assistantRoutes(ctx, lifecycle),
        threadRoutes(ctx, lifecycle),
        threadStateRoutes(ctx),
        runRoutes(ctx, runs),
      ],
    });
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
    });
    await worker.start();
  } catch (error) {
    await http?.close().catch(() => undefined);
    await worker?.stop().catch(() => undefined);
    runs?.close();
    await runner.stop().catch(() => undefined);
    await store.close().catch(() => undefined);
    throw error;
  }
  const address = http.server.address();
  const port = typeof address === "object" && address ? address.port : config.port;
  const app = http;
  const runWorker = worker!;
  const runService = runs!;
  let closing: Promise<void> | undefined;
  return {
    url: `http://${config.host.includes(":") ? `[${config.host}]` : config.host}:${port}`,
    port,
    storeKind: store.kind,
    store,
    runner,
    checkpointer,
    http: app,
    close() {
      closing ??= (async () => {
        await runWorker.stop();
        runService.close();
        await app.close();
        await runner.stop();
        checkpointer.close();
        await store.close();
      })();
      return closing;
    },
  };
}
