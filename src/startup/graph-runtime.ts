import { CHECKPOINT_STREAM_PREFIX } from "../domain/checkpoint-events.js";
import { LiveFeed } from "../eventstore/live-feed.js";
import type { EventStore } from "../eventstore/types.js";
import type { ReadModels } from "../read-models/all.js";
import { LazyGraphRuntime } from "../runtime/lazy-graph-runtime.js";
import type { Assembly } from "./assembly.js";
import type { Configuration } from "./configuration.js";

export interface GraphRuntimePart {
  /** Loads LangGraph and the graph files on first demand (startRunWorker asks once the server listens). */
  runtime: LazyGraphRuntime;
  /** What /ok and /info report: "ready" once the run worker runs on the loaded graphs (set by startRunWorker). */
  status: "loading" | "ready";
}

/** The graph runtime, not loaded yet, and what its checkpointer follows; nothing of LangGraph is imported here. */
export function prepareGraphRuntime(
  { config, deps, parts, startup }: Assembly,
  { graphs, langgraph, typeSchemas }: Configuration,
  store: EventStore,
  readModels: ReadModels,
): GraphRuntimePart {
  // With a shared store, other processes append checkpoints too: the cache follows them live.
  // A SQLite store belongs to this process alone, whose own appends keep the cache current.
  const live =
    store.kind === "sqlite"
      ? undefined
      : parts.use(
          "live checkpoint feed",
          new LiveFeed(store, { streamPrefixes: [CHECKPOINT_STREAM_PREFIX] }, "checkpoints-live", (event, error) =>
            readModels.runner.quarantine.tryRecord("checkpoints-live", event, error),
          ),
          (f) => f.close(),
        );
  const runtime = new LazyGraphRuntime(async () => {
    await deps.beforeGraphRuntime?.();
    const { loadGraphRuntime } = await import("../runtime/graph-runtime.js");
    const loaded = await loadGraphRuntime({
      catalogue: graphs,
      baseDir: langgraph.baseDir,
      typeSchemas,
      logLevel: config.logLevel,
      checkpointer: {
        store,
        live,
        cacheThreads: config.checkpointCacheThreads,
        cacheBytes: config.checkpointCacheBytes,
        metadataFromConfig: true,
      },
    });
    startup.mark("graph runtime");
    return loaded;
  });
  parts.defer("checkpointer", async () => (await runtime.ifStarted())?.checkpointer.close());
  return { runtime, status: "loading" };
}
