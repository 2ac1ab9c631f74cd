import { setFlagsFromString } from "node:v8";
import { loadConfig } from "./config.js";
import { startServer } from "./server.js";

/** Entry point: one clear line and a non-zero exit for anything that stops start-up. */
async function main(): Promise<void> {
  const config = loadConfig();
  // Bounds the heap a burst of runs leaves behind (read by V8 at each collection, so set at run time).
  if (config.heapGrowingPercent > 0) setFlagsFromString(`--heap-growing-percent=${config.heapGrowingPercent}`);
  const server = await startServer(config);
  console.log(`agent-server listening on ${server.url} (store: ${server.storeKind}, data: ${config.dataDir})`);

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
