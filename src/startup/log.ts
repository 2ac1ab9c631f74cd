import { rmSync } from "node:fs";
import path from "node:path";
import { openStore } from "../eventstore/open.js";
import { withSchemas } from "../eventstore/validating.js";
import { recordingPositions } from "../eventstore/attributing-store.js";
import { LogHealth } from "../eventstore/log-health.js";
import { openEncryption } from "../eventstore/encryption.js";
import type { EventStore } from "../eventstore/types.js";
import { STEP_EVENT_TYPES, schemaForEventType } from "../domain/events.js";
import { openReadModels, READ_MODELS_FILE, readModelsKeyOf, ReadModelsKeyMismatch, type ReadModels } from "../read-models/all.js";
import type { Assembly } from "./assembly.js";

export interface Log {
  /** The log with its schema checks, attribution and append metrics. */
  store: EventStore;
  /** The key of the read models' file when the log is encrypted (derived from the master key). */
  readModelsKey?: Buffer;
  health: LogHealth;
}

/** Opens the log: registered first, it closes last. */
export async function openLog({ config, parts, startup, metrics }: Assembly): Promise<Log> {
  const health = new LogHealth();
  // Registered before the store, so it closes after it.
  const encryption = await openEncryption(config.encryption, async (jsonKeys) => (await import("../domain/content-fields.js")).contentPolicy(jsonKeys));
  if (encryption) parts.use("key vault", encryption, (e) => e.close());
  const log = await openStore({ ...config, health });
  // Asked of the adapter: the wrappers below pass on the port's required methods only.
  metrics.walSyncs = () => log.syncStats?.();
  // Schema checks outside the encryption: they look at plaintext.
  const stored = encryption ? encryption.wrap(log) : log;
  const store = parts.use(
    "event store",
    recordingPositions(withSchemas(stored, schemaForEventType, config.eventSchemaChecks === "all" ? undefined : STEP_EVENT_TYPES), metrics.onAppend),
    (s) => s.close(),
  );
  startup.mark("event store");
  return { store, health, readModelsKey: encryption ? readModelsKeyOf(encryption.masterKeys) : undefined };
}

/** The read models, caught up with the log before anything is served; their gauges and the log's are registered with them. */
export async function startReadModels({ config, parts, startup, metrics }: Assembly, log: Log): Promise<ReadModels> {
  const readModels = parts.use("read models", await openReadModelsFor(log.store, config.dataDir, log.readModelsKey), (m) => m.runner.close());
  await readModels.runner.start(log.store, { health: log.health, waitDeadlineMs: config.eventstoreDeadlineMs });
  startup.mark("read models");
  metrics.observe(log.store, readModels, log.health);
  return readModels;
}

/**
 * Opens DATA_DIR/read-models.sqlite (encrypted with `key` when the log is). A database ahead of the
 * log (the log was replaced or truncated), or one its key does not open (the master key changed, or
 * encryption was turned on or off), cannot be used: it is removed and rebuilt from the log.
 */
async function openReadModelsFor(store: EventStore, dataDir: string, key: Buffer | undefined): Promise<ReadModels> {
  const remove = () => {
    for (const suffix of ["", "-wal", "-shm"]) rmSync(path.join(dataDir, READ_MODELS_FILE) + suffix, { force: true });
  };
  let models: ReadModels;
  try {
    models = openReadModels(dataDir, { key });
  } catch (error) {
    if (!(error instanceof ReadModelsKeyMismatch)) throw error;
    console.error(`agent-server: ${error.message} (rebuilding it now)`);
    remove();
    return openReadModels(dataDir, { key });
  }
  if (models.runner.position <= (await store.headPosition())) return models;
  models.runner.db.close();
  remove();
  return openReadModels(dataDir, { key });
}
