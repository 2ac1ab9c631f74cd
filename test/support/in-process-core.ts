import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { openSqliteStore, type SqliteEventStore } from "../../src/eventstore/sqlite.js";
import { withSchemas } from "../../src/eventstore/validating.js";
import { schemaForEventType } from "../../src/domain/events.js";
import type { EventStore } from "../../src/eventstore/types.js";
import { openReadModels, type ReadModels } from "../../src/read-models/all.js";
import { EventSourcedCheckpointSaver } from "../../src/runtime/checkpointer.js";
import { loadLanggraphConfig } from "../../src/langgraph-config.js";
import { loadGraphRegistry, type GraphRegistry } from "../../src/runtime/graphs.js";
import { loadConfig } from "../../src/config.js";
import type { AppContext } from "../../src/app/context.js";
import { isoNow } from "../../src/util/time.js";
import { ensureDefaultAssistants } from "../../src/app/assistants.js";
import { RunsService } from "../../src/app/runs.js";
import { threadLifecycle } from "../../src/app/thread-lifecycle.js";
import type { CompletionDeps } from "../../src/runtime/run-completion.js";
import { CommandPipeline } from "../../src/commands/pipeline.js";
import { TEST_GRAPHS } from "./server.js";

/** The application core over a SQLite log in a temporary directory, with the test graphs, in this process (no HTTP). */
export interface InProcessCore {
  dir: string;
  /** The SQLite store itself (its stats), under the log the core uses. */
  sqlite: SqliteEventStore;
  /** The log as the core sees it (schema-checked, and wrapped as `wrap` asked). */
  store: EventStore;
  readModels: ReadModels;
  checkpointer: EventSourcedCheckpointSaver;
  graphs: GraphRegistry;
  ctx: AppContext;
  completion: CompletionDeps;
  runs: RunsService;
  /** Closes the runs service, the read models and the log, and removes the directory (stop workers first). */
  close(): Promise<void>;
}

export async function inProcessCore(
  options: {
    synchronous?: "FULL" | "NORMAL";
    /** Wraps the schema-checked log the core appends to. */
    wrap?: (store: EventStore, sqlite: SqliteEventStore) => EventStore;
    /** The log as the read models' subscription sees it (default: the core's). */
    readModelsFeed?: (store: EventStore) => EventStore;
  } = {},
): Promise<InProcessCore> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "agent-server-core-"));
  const sqlite = await openSqliteStore({ path: path.join(dir, "events.sqlite"), synchronous: options.synchronous ?? "NORMAL" });
  const checked = withSchemas(sqlite, schemaForEventType);
  const store = options.wrap ? options.wrap(checked, sqlite) : checked;
  const readModels = openReadModels(dir);
  await readModels.runner.start(options.readModelsFeed ? options.readModelsFeed(store) : store);
  const checkpointer = new EventSourcedCheckpointSaver({ store });
  const langgraph = await loadLanggraphConfig(TEST_GRAPHS);
  const graphs = await loadGraphRegistry(langgraph.config, langgraph.baseDir, { graphDefaults: {} });
  const ctx: AppContext = {
    config: loadConfig({ DATA_DIR: dir }),
    langgraph,
    store,
    commands: new CommandPipeline(store, readModels.runner),
    readModels,
    graphs: graphs.catalogue,
    runtime: async () => ({ graphs, checkpointer }),
    now: isoNow,
  };
  await ensureDefaultAssistants(ctx, graphs.defaultAssistants());
  const lifecycle = threadLifecycle(ctx);
  const completion: CompletionDeps = {
    store,
    commands: ctx.commands,
    readModels,
    now: isoNow,
    deleteTemporaryThread: (id, runCreatedAt) => lifecycle.deleteTemporary(id, runCreatedAt),
    discardCheckpointsAfter: async (id, after) => void (await checkpointer.discardAfter(id, after)),
  };
  const runs = new RunsService(ctx, completion);
  return {
    dir,
    sqlite,
    store,
    readModels,
    checkpointer,
    graphs,
    ctx,
    completion,
    runs,
    async close() {
      runs.close();
      await readModels.runner.close();
      await sqlite.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
