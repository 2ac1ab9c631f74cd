import { ulid } from "ulid";
import type { EventStore } from "../eventstore/types.js";
import type { RunWorker } from "../runtime/worker.js";
import type { Assembly } from "./assembly.js";
import type { Configuration } from "./configuration.js";
import type { GraphRuntimePart } from "./graph-runtime.js";
import type { Services } from "./services.js";

/**
 * Loads the graph runtime in the background, once the server listens; the run worker starts once it has
 * (runs queued meanwhile wait in the log, as they would for a free slot), then the graph watcher. Requests
 * that need a graph await the runtime. Returns `ready`, which settles once the worker runs (rejects when a
 * graph cannot be loaded).
 */
export function startRunWorker(
  { config, deps, parts, startup, metrics, logClock }: Assembly,
  { langgraph }: Configuration,
  store: EventStore,
  graphRuntime: GraphRuntimePart,
  { completion, runs, storeService }: Services,
): Promise<void> {
  let worker: RunWorker | undefined;
  // The worker's identity in the claims it appends is known now (/metrics names it before the worker runs).
  const owner = `worker-${ulid()}`;
  metrics.claimOwners.run = owner;
  metrics.claims.run = () => ({ won: worker?.stats.claimed ?? 0, lost: worker?.stats.lost ?? 0 });
  metrics.runsExecuting = () => worker?.running ?? 0;
  const ready = (async () => {
    const [{ graphs: loaded, checkpointer }, { RunWorker }, { EventSourcedStore }] = await Promise.all([
      graphRuntime.runtime.get(),
      import("../runtime/worker.js"),
      import("../app/graph-store.js"),
    ]);
    if (parts.isClosing) return;
    worker = new RunWorker({
      ...completion,
      owner,
      graphs: loaded,
      checkpointer,
      maxConcurrentRuns: config.maxConcurrentRuns,
      runTimeoutMs: config.runTimeoutSecs * 1000,
      leaseMs: config.runLeaseSecs * 1000,
      exclusiveStore: store.kind === "sqlite",
      storeFor: (run) => new EventSourcedStore(storeService, { run_id: run.run_id, thread_id: run.thread_id }),
      clock: logClock,
    });
    await worker.start();
    const started = worker;
    // A run enqueued at its thread's head is claimed at once, in an append that depends on the enqueue (see RunsService.onHeadEnqueued).
    // (A stopped worker declines offers: nothing to undo at shutdown.)
    runs.onHeadEnqueued((run, enqueued) => started.offer(run, enqueued));
    graphRuntime.status = "ready";
    startup.mark("run worker");
    if (config.watch) {
      const { GraphWatcher } = await import("../runtime/graph-watch.js");
      if (parts.isClosing) return;
      const watcher = parts.use(
        "graph watcher",
        new GraphWatcher({ registry: loaded, configPath: langgraph.configPath, env: langgraph.env, onReload: deps.onGraphReload }),
        (w) => w.close(),
      );
      await watcher.start();
    }
  })();
  // Handled here too, so that a caller who never awaits `ready` gets no unhandled rejection (main.ts reports it).
  ready.catch(() => undefined);
  parts.defer("run worker", async () => {
    await ready.catch(() => undefined);
    await worker?.stop();
  });
  return ready;
}
