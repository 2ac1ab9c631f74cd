import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@langchain/langgraph-sdk";
import { loadConfig, type Config } from "../../src/config.js";
import { startServer, type RunningServer, type ServerDeps } from "../../src/server.js";

const testDir = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
export const repoRoot = path.dirname(testDir);
/** The test graphs (agent, error, delay, interrupt, subgraph, custom, factory). */
export const TEST_GRAPHS = path.join(testDir, "graphs", "langgraph.json");

export interface TestServer {
  url: string;
  dataDir: string;
  server: RunningServer;
  /** The official SDK client pointed at this server. */
  client: Client;
  /** Stops the server and starts a new one on the same data directory (on a new port, or on the same one with `samePort`). */
  restart(options?: { samePort?: boolean }): Promise<TestServer>;
  /** Stops the server and removes its data directory. */
  close(): Promise<void>;
}

export interface TestServerOptions {
  /** Environment overrides (HOST and PORT are always 127.0.0.1 and 0). */
  env?: Record<string, string>;
  /** Reuse this data directory instead of a new temporary one. */
  dataDir?: string;
  /** Replaced parts (the cron scheduler's clock, the webhook DNS resolver). */
  deps?: ServerDeps;
  /** Listen on this port instead of an ephemeral one. */
  port?: number;
}

/** A real server on 127.0.0.1, ephemeral port, temporary data directory, test graphs. */
export async function startTestServer(options: TestServerOptions = {}): Promise<TestServer> {
  const dataDir = options.dataDir ?? (await mkdtemp(path.join(os.tmpdir(), "agent-server-test-")));
  const config: Config = loadConfig({
    LANGGRAPH_JSON: TEST_GRAPHS,
    LOG_LEVEL: "silent",
    // Every event any test writes is checked against its schema, the per-step ones of runs included.
    EVENT_SCHEMA_CHECKS: "all",
    // Node's own accepting: no descriptor helper process per test server (test/http/accept-watchers.test.ts tests it).
    ACCEPTS_PER_TURN: "1",
    ...options.env,
    HOST: "127.0.0.1",
    PORT: String(options.port ?? 0),
    DATA_DIR: dataDir,
  });
  const server = await startServer(config, options.deps);
  // As main.ts: a graph that cannot be loaded stops the server. Tests start once the run worker is up.
  await server.ready.catch(async (error: unknown) => {
    await server.close();
    throw error;
  });
  const apiKey = options.env?.LANGGRAPH_API_KEY;
  const handle: TestServer = {
    url: server.url,
    dataDir,
    server,
    client: new Client({ apiUrl: server.url, apiKey: apiKey ?? null, defaultHeaders: {} }),
    async restart(restartOptions = {}) {
      await server.close();
      return startTestServer({ ...options, dataDir, ...(restartOptions.samePort ? { port: Number(new URL(server.url).port) } : {}) });
    },
    async close() {
      await server.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
  return handle;
}
