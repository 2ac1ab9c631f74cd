import path from "node:path";
import type { EventStore } from "./types.js";
import { toEsdbClientConnectionString } from "./connection-string.js";
import type { LogHealth } from "./log-health.js";

export interface StoreSelection {
  dataDir: string;
  eventstoreUrl: string | undefined;
  sqliteSynchronous?: "FULL" | "NORMAL";
  /** EventStoreDB: where connection and subscription states are reported, and the deadline of one call (retries included). */
  health?: LogHealth;
  eventstoreDeadlineMs?: number;
}

/** EventStoreDB when a connection string is configured, otherwise the embedded SQLite file. */
export async function openStore(selection: StoreSelection): Promise<EventStore> {
  if (selection.eventstoreUrl) {
    const { openEsdbStore } = await import("./esdb.js");
    return openEsdbStore({
      connectionString: toEsdbClientConnectionString(selection.eventstoreUrl),
      health: selection.health,
      deadlineMs: selection.eventstoreDeadlineMs,
    });
  }
  const { openSqliteStore } = await import("./sqlite.js");
  return openSqliteStore({
    path: path.join(selection.dataDir, "events.sqlite"),
    synchronous: selection.sqliteSynchronous ?? "FULL",
  });
}
