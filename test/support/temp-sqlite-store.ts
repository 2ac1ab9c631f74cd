import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Test } from "tap";
import { openSqliteStore, type SqliteEventStore } from "../../src/eventstore/sqlite.js";

/** A SQLite store in a fresh temporary folder, closed and removed when the test ends. */
export async function tempSqliteStore(t: Test, prefix: string): Promise<SqliteEventStore> {
  const dir = await mkdtemp(path.join(tmpdir(), `${prefix}-`));
  const store = await openSqliteStore({ path: path.join(dir, "events.sqlite") });
  t.teardown(async () => {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });
  return store;
}
