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

export interface RunningServer {
  url: string;
  port: number;
  storeKind: EventStore["kind"];
  store: EventStore;
  runner: ProjectionRunner;
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
  const store = withSchemas(await openStore(config), schemaForEventType);
  const runner = new ProjectionRunner(store, allProjections);
  let http: FastifyInstance | undefined;
  try {
    await runner.start();
    http = await buildHttpApp({
      bodyLimit: config.bodyLimit,
      apiKey: config.apiKey,
      logLevel: config.logLevel,
      routes: [metaRoutes({ storeKind: store.kind, langgraphJsVersion: "1", webhooksEnabled: false })],
    });
    try {
      await http.listen({ host: config.host, port: config.port });
    } catch (error) {
      throw describeListenError(error, config);
    }
  } catch (error) {
    await http?.close().catch(() => undefined);
    await runner.stop().catch(() => undefined);
    await store.close().catch(() => undefined);
    throw error;
  }
  const address = http.server.address();
  const port = typeof address === "object" && address ? address.port : config.port;
  const app = http;
  let closing: Promise<void> | undefined;
  return {
    url: `http://${config.host.includes(":") ? `[${config.host}]` : config.host}:${port}`,
    port,
    storeKind: store.kind,
    store,
    runner,
    http: app,
    close() {
      closing ??= (async () => {
        await app.close();
        await runner.stop();
        await store.close();
      })();
      return closing;
    },
  };
}
