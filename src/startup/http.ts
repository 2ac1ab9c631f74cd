import type { FastifyInstance, FastifyPluginAsync } from "fastify";
import type { Config } from "../config.js";
import type { ReadModels } from "../read-models/all.js";
import { LANGGRAPH_JS_VERSION } from "../version.js";
import { buildHttpApp } from "../http/app.js";
import { authenticatedCallerOf, callerOf } from "../http/auth.js";
import { requestContextOf } from "../http/actor.js";
import { logPositionHooks } from "../http/log-position.js";
import { durableResponses } from "../http/durable-responses.js";
import { bindLoopbackFetch } from "../http/custom-app.js";
import { normalizeMountPrefix } from "../http/mount-prefix.js";
import { metricsRoutes } from "../http/metrics.js";
import { metaRoutes } from "../http/routes/meta.js";
import { uiRoutes } from "../http/routes/ui.js";
import { assistantRoutes } from "../http/routes/assistants.js";
import { threadRoutes } from "../http/routes/threads.js";
import { threadStreamRoutes } from "../http/routes/thread-stream.js";
import { threadStateRoutes } from "../http/routes/thread-state.js";
import { auditRoutes } from "../http/routes/audit.js";
import { quarantineRoutes } from "../http/routes/quarantine.js";
import { runRoutes } from "../http/routes/runs.js";
import { cronRoutes } from "../http/routes/crons.js";
import { webhookRoutes } from "../http/routes/webhooks.js";
import { storeRoutes } from "../http/routes/store.js";
import { internalRoutes } from "../http/routes/internal.js";
import { a2aRoutes } from "../a2a/routes.js";
import { mcpRoutes } from "../mcp/routes.js";
import { protocolRoutes } from "../protocol/routes.js";
import { watchAccepts } from "../http/accept-watchers.js";
import type { Assembly } from "./assembly.js";
import type { Configuration } from "./configuration.js";
import type { Log } from "./log.js";
import type { GraphRuntimePart } from "./graph-runtime.js";
import type { Services } from "./services.js";

/**
 * The HTTP app with its routes, registered after the services it serves. What HTTP's close would wait
 * for is registered after it, to be ended before it: the run streams (RunsService.close ends them and
 * waits for those held open) and the schema requests awaiting a TypeScript pass (ended, they answer what
 * the runtime tells).
 */
export async function startHttp(
  a: Assembly,
  configuration: Configuration,
  log: Log,
  readModels: ReadModels,
  graphRuntime: GraphRuntimePart,
  services: Services,
): Promise<FastifyInstance> {
  const { config, parts, startup } = a;
  const { store } = log;
  const httpConfig = configuration.langgraph.config.http;
  const http = parts.use(
    "HTTP server",
    await buildHttpApp({
      bodyLimit: config.bodyLimit,
      apiKey: config.apiKey,
      logLevel: config.logLevel,
      cors: httpConfig.cors,
      auth: configuration.auth,
      hooks: [
        logPositionHooks(readModels.runner, (request) => requestContextOf(request, config.apiKey !== undefined)),
        durableResponses(() => store.whenDurable()),
      ],
      customApp: configuration.customApp,
      mountPrefix: httpConfig.mount_prefix,
      routes: routesOf(a, configuration, log, readModels, graphRuntime, services),
    }),
    (app) => app.close(),
  );
  startup.mark("http routes");
  parts.defer("run streams", () => services.runs.close());
  parts.defer("type schema passes", () => configuration.typeSchemas.close());
  // The SDK's Client without apiUrl (in custom routes and graphs) calls this server in-process.
  parts.defer("loopback fetch", bindLoopbackFetch(http, normalizeMountPrefix(httpConfig.mount_prefix)));
  return http;
}

/** `http.disable_*` leave a group of built-in routes out, as the official servers do. */
function routesOf(
  { config, metrics }: Assembly,
  { langgraph, uiBundles }: Configuration,
  { store, health }: Log,
  readModels: ReadModels,
  graphRuntime: GraphRuntimePart,
  { ctx, lifecycle, runs, crons, storeService }: Services,
): FastifyPluginAsync[] {
  const httpConfig = langgraph.config.http;
  return [
    ...(httpConfig.disable_meta
      ? []
      : [
          metaRoutes({
            storeKind: store.kind,
            langgraphJsVersion: LANGGRAPH_JS_VERSION,
            webhooksEnabled: !httpConfig.disable_webhooks,
            positions: async () => ({
              head: await store.headPosition(),
              projections: readModels.runner.tables.map((t) => ({ name: t.name, position: readModels.runner.position })),
            }),
            health,
            checkLog: () => store.headPosition(),
            graphRuntime: () => graphRuntime.status,
            quarantine: () => readModels.runner.quarantine.summary(),
          }),
          metricsRoutes(metrics),
        ]),
    ...(httpConfig.disable_assistants ? [] : [assistantRoutes(ctx, lifecycle)]),
    ...(httpConfig.disable_threads
      ? []
      : [
          threadRoutes(ctx, lifecycle),
          threadStreamRoutes(ctx, lifecycle, (end) => runs.lifecycle.track(end), metrics),
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
    internalRoutes({ ctx, lifecycle, runs, store: storeService }, { devMode: config.devMode }),
  ];
}

/** Listens; returns the address the server answers on (PORT=0 picks a free port). */
export async function listen({ config, startup }: Assembly, http: FastifyInstance): Promise<{ url: string; port: number }> {
  try {
    await http.listen({ host: config.host, port: config.port });
  } catch (error) {
    throw describeListenError(error, config);
  }
  startup.mark("listening");
  const address = http.server.address();
  const port = typeof address === "object" && address ? address.port : config.port;
  return { url: `http://${config.host.includes(":") ? `[${config.host}]` : config.host}:${port}`, port };
}

/**
 * The extra descriptors of the listening socket (ACCEPTS_PER_TURN), once the server has started (`started`):
 * it answers on its own descriptor meanwhile. Registered after HTTP, so closed before it: no copy accepts once
 * HTTP stops accepting. Settles with how many copies it holds (listening, or in reserve for bursts).
 */
export function startAcceptWatchers({ config, parts, metrics }: Assembly, http: FastifyInstance, started: Promise<unknown>): Promise<number> {
  const watchers = parts.use(
    "extra accepting descriptors",
    watchAccepts(http.server, config.acceptsPerTurn, (m) => http.log.warn(m), { startAfter: started }),
    (w) => w.close(),
  );
  metrics.acceptingDescriptors = () => watchers.listening;
  return watchers.ready;
}

function describeListenError(error: unknown, config: Config): Error {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === "EADDRINUSE") return new Error(`port ${config.port} on ${config.host} is already in use`);
  if (code === "EACCES") return new Error(`no permission to listen on ${config.host}:${config.port}`);
  if (code === "EADDRNOTAVAIL") return new Error(`address ${config.host} is not available on this machine`);
  return error instanceof Error ? error : new Error(String(error));
}
