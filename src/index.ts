/**
 * The package's programmatic entry (`import { startServer } from "agent-server"`): the same
 * server the `agent-server` command starts, for a project that embeds it in its own process.
 * Importing it starts nothing.
 */
export { loadConfig, ConfigError, type Config } from "./config.js";
export { startServer, type RunningServer } from "./server.js";
export { loadLanggraphConfig, LanggraphConfigError, type LoadedLanggraphConfig } from "./langgraph-config.js";
export { VERSION } from "./version.js";
