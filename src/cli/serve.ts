import path from "node:path";
import type { Config } from "../config.js";
import { loadLanggraphConfig, type LoadedLanggraphConfig } from "../langgraph-config.js";
import { startServer } from "../server.js";

export interface ServeOptions {
  /** The langgraph.json already read by the caller (the CLI); read again (without applying `env`) when absent. */
  langgraph?: LoadedLanggraphConfig;
  /** Development mode as `agent-server dev` starts it: a second line points LangGraph Studio at the server. */
  studioHint?: boolean;
}

/** A connection string without its `user:password@` part: the start line is printed to logs. */
export function withoutCredentials(url: string): string {
  return url.trim().replace(/^([a-z+]+:\/\/)[^@/?#]*@/i, "$1");
}

/** Where the log lives, as the start line names it: the SQLite file, or the EventStoreDB URL. */
export function describeStore(config: Pick<Config, "eventstoreUrl" | "dataDir">): string {
  return config.eventstoreUrl ? `EventStoreDB ${withoutCredentials(config.eventstoreUrl)}` : `SQLite ${path.join(config.dataDir, "events.sqlite")}`;
}

/**
 * The line printed once the server listens: the URL (tests and scripts wait for "listening on
 * <url>"), which langgraph.json was loaded and its graph ids, and where the log is, so a project
 * served from the wrong folder or against the wrong store is visible at once.
 */
export function startLine(url: string, config: Config, langgraph: LoadedLanggraphConfig | undefined): string {
  const graphs = langgraph ? Object.keys(langgraph.config.graphs).join(", ") || "(none)" : "(unknown)";
  const configPath = langgraph?.configPath ?? config.langgraphJsonPath;
  return `agent-server listening on ${url} (config: ${configPath}, graphs: ${graphs}, store: ${describeStore(config)}, data: ${config.dataDir})`;
}

/** Starts the server, prints its start and ready lines, and stops it on SIGTERM / SIGINT; one clear line and exit 1 for anything that stops start-up. */
export async function serve(config: Config, options: ServeOptions = {}): Promise<void> {
  const server = await startServer(config);
  // Bounds the heap a burst of runs leaves behind (read by V8 at each collection, so set at run time;
  // after listening: node:v8 is one module less to load before the server answers).
  if (config.heapGrowingPercent > 0) (await import("node:v8")).setFlagsFromString(`--heap-growing-percent=${config.heapGrowingPercent}`);
  // startServer validated the file already: reading it again only names the graphs.
  const langgraph = options.langgraph ?? (await loadLanggraphConfig(config.langgraphJsonPath, { applyEnv: false }).catch(() => undefined));
  console.log(startLine(server.url, config, langgraph));
  if (options.studioHint) console.log(`agent-server dev: LangGraph Studio: https://smith.langchain.com/studio/?baseUrl=${encodeURIComponent(server.url)}`);
  // The graphs load after the server listens: one that cannot be loaded stops the server, as it would before listening.
  server.ready.then(
    () => console.log("agent-server ready: graphs loaded, run worker started"),
    async (error: unknown) => {
      console.error(`agent-server: ${error instanceof Error ? error.message : String(error)}`);
      await server.close().catch(() => undefined);
      process.exit(1);
    },
  );

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    console.log(`${signal}: shutting down`);
    try {
      await server.close();
      process.exit(0);
    } catch (error) {
      console.error(`error during shutdown: ${(error as Error).message}`);
      process.exit(1);
    }
  };
  process.on("SIGTERM", () => void stop("SIGTERM"));
  process.on("SIGINT", () => void stop("SIGINT"));
}
