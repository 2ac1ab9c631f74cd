import path from "node:path";
import type { EventStore } from "./types.js";
import { toEsdbClientConnectionString } from "./connection-string.js";

export interface StoreSelection {
  dataDir: string;
  eventstoreUrl: string | undefined;
  sqliteSynchronous?: "FULL" | "NORMAL";
}

/** EventStoreDB when a connection string is configured, otherwise the embedded SQLite file. */
export async function openStore(selection: StoreSelection): Promise<EventStore> {
  if (selection.eventstoreUrl) {
    const { openEsdbStore } = await import("./esdb.js");
    return openEsdbStore({ connectionString: toEsdbClientConnectionString(selection.eventstoreUrl) });
  }
  const { openSqliteStore } = await import("./sqlite.js");
  return openSqliteStore({
    path: path.join(selection.dataDir, "events.sqlite"),
    synchronous: selection.sqliteSynchronous ?? "FULL",
  });
}
