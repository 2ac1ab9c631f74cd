import { loadConfig } from "./config.js";
import { startServer } from "./server.js";

/** Entry point: one clear line and a non-zero exit for anything that stops start-up. */
async function main(): Promise<void> {
  const config = loadConfig();
  const server = await startServer(config);
  // Bounds the heap a burst of runs leaves behind (read by V8 at each collection, so set at run time;
  // after listening: node:v8 is one module less to load before the server answers).
  if (config.heapGrowingPercent > 0) (await import("node:v8")).setFlagsFromString(`--heap-growing-percent=${config.heapGrowingPercent}`);
  console.log(`agent-server listening on ${server.url} (store: ${server.storeKind}, data: ${config.dataDir})`);
  // The graphs load after the server listens: one that cannot be loaded stops the server, as it would before listening.
  server.ready.then(() => console.log("agent-server ready: graphs loaded, run worker started"), async (error: unknown) => {
    console.error(`agent-server: ${error instanceof Error ? error.message : String(error)}`);
    await server.close().catch(() => undefined);
    process.exit(1);
  });

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

main().catch((error: unknown) => {
  console.error(`agent-server: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
