import path from "node:path";
import type { TableProjection } from "./table.js";
import { CatchUpRunner } from "./catch-up-runner.js";
import { assistantsTable, AssistantsReadModel } from "./assistants.js";
import { threadsTable, ThreadsReadModel } from "./threads.js";
import { runsTable, RunsReadModel } from "./runs.js";
import { webhooksTable, WebhooksReadModel } from "./webhooks.js";
import { cronsTable, CronsReadModel } from "./crons.js";
import { storeItemsTable, StoreReadModel } from "./store-items.js";
import { checkpointTtlTable, CheckpointTtlReadModel } from "./checkpoint-ttl.js";
import { cronOwnersTable, CronOwnersReadModel } from "./cron-owners.js";
import { idempotencyKeysTable, IdempotencyKeysReadModel } from "./idempotency-keys.js";

export { readModelsKeyOf, ReadModelsKeyMismatch } from "./encrypted-file.js";

/** Every table the read-model database holds, fed by one filtered `$all` subscription. */
export const allTables: TableProjection[] = [
  assistantsTable,
  threadsTable,
  runsTable,
  webhooksTable,
  cronsTable,
  cronOwnersTable,
  idempotencyKeysTable,
  storeItemsTable,
  checkpointTtlTable,
];

/** File name of the read-model database inside DATA_DIR. */
export const READ_MODELS_FILE = "read-models.sqlite";

/** The read-model database and the queries of each read model. */
export interface ReadModels {
  /** The catch-up runner that feeds every table, and the database they live in. */
  runner: CatchUpRunner;
  assistants: AssistantsReadModel;
  threads: ThreadsReadModel;
  runs: RunsReadModel;
  webhooks: WebhooksReadModel;
  crons: CronsReadModel;
  /** Crons by thread and owner, deleted ones included: what a purge or an erasure removes. */
  cronOwners: CronOwnersReadModel;
  /** `Idempotency-Key` streams by thread: what a purge removes with the thread. */
  idempotencyKeys: IdempotencyKeysReadModel;
  /** Store items (PUT/GET /store/items, the graphs' BaseStore). */
  storeItems: StoreReadModel;
  /** Threads by last checkpoint activity, for `checkpointer.ttl`. */
  checkpointTtl: CheckpointTtlReadModel;
}

export function readModelsOf(store: CatchUpRunner): ReadModels {
  return {
    runner: store,
    assistants: new AssistantsReadModel(store.db),
    threads: new ThreadsReadModel(store.db),
    runs: new RunsReadModel(store.db),
    webhooks: new WebhooksReadModel(store.db),
    crons: new CronsReadModel(store.db),
    cronOwners: new CronOwnersReadModel(store.db),
    idempotencyKeys: new IdempotencyKeysReadModel(store.db),
    storeItems: new StoreReadModel(store.db),
    checkpointTtl: new CheckpointTtlReadModel(store.db),
  };
}

export interface OpenReadModelsOptions {
  /**
   * With LANGGRAPH_AES_KEY: `readModelsKeyOf(masterKeys)`, the file is then encrypted at rest. A file
   * this key does not open (written before the key was set, under another key, or encrypted while no
   * key is given) throws a ReadModelsKeyMismatch: remove it (with -wal and -shm) and open again.
   */
  key?: Buffer;
  tables?: readonly TableProjection[];
}

/** Opens `DATA_DIR/read-models.sqlite` (or an in-memory database) with every table. */
export function openReadModels(dataDir: string | ":memory:", options: OpenReadModelsOptions = {}): ReadModels {
  const file = dataDir === ":memory:" ? ":memory:" : path.join(dataDir, READ_MODELS_FILE);
  return readModelsOf(CatchUpRunner.open({ file, tables: options.tables ?? allTables, key: options.key }));
}
