import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { Test } from "tap";
import { openSqliteStore } from "../../src/eventstore/sqlite.js";
import { withSchemas } from "../../src/eventstore/validating.js";
import { schemaForEventType } from "../../src/domain/events.js";
import type { EventStore } from "../../src/eventstore/types.js";
import { openReadModels, type ReadModels } from "../../src/read-models/all.js";

/**
 * A schema-checked SQLite log and its read models, following it, in a temporary directory: closed and
 * removed when the test ends. `checked: false` leaves the schema checks out (to write what the server
 * never would, e.g. a poisoned event).
 */
export async function logWithReadModels(
  t: Test,
  prefix: string,
  options: { synchronous?: "FULL" | "NORMAL"; foldDeferMs?: number; checked?: boolean } = {},
): Promise<{ dir: string; store: EventStore; readModels: ReadModels }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), prefix));
  const log = await openSqliteStore({ path: path.join(dir, "events.sqlite"), synchronous: options.synchronous });
  const store = options.checked === false ? log : withSchemas(log, schemaForEventType);
  const readModels = openReadModels(dir);
  await readModels.runner.start(store, { foldDeferMs: options.foldDeferMs });
  t.teardown(async () => {
    await readModels.runner.close();
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });
  return { dir, store, readModels };
}
