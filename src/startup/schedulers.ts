import type { FastifyInstance } from "fastify";
import type { EventStore } from "../eventstore/types.js";
import type { ReadModels } from "../read-models/all.js";
import { CronScheduler } from "../app/cron-scheduler.js";
import { StoreSweeper } from "../app/store-sweeper.js";
import { TtlSweeper } from "../app/ttl-sweeper.js";
import { CheckpointTtlSweeper, checkpointTtlSettings } from "../app/checkpoint-ttl-sweeper.js";
import { IdleMemory } from "../util/idle-memory.js";
import type { Assembly } from "./assembly.js";
import type { Services } from "./services.js";

/** The store-item TTL sweeper: built once HTTP is (it logs there), to stop before HTTP closes. */
export function startStoreSweeper({ parts, clock }: Assembly, store: EventStore, readModels: ReadModels, http: FastifyInstance): void {
  const storeSweeper = parts.use("store sweeper", new StoreSweeper({ store, readModels, clock, log: (m) => http.log.error(m) }), (s) => s.stop());
  storeSweeper.start();
}

/** The cron scheduler, the idle-memory sampler, the thread TTL and checkpoint TTL sweepers: the last parts, the first closed. */
export function startSchedulers(
  { config, parts, startup, metrics, clock }: Assembly,
  store: EventStore,
  readModels: ReadModels,
  { ctx, lifecycle, crons }: Services,
): { scheduler: CronScheduler; ttlSweeper: TtlSweeper } {
  const scheduler = parts.use(
    "cron scheduler",
    new CronScheduler({
      store,
      readModels,
      startRun: (cron, tick) => crons.startRun(cron, tick),
      clock,
      catchUpMs: config.cronCatchUpSecs === null ? null : config.cronCatchUpSecs * 1000,
      log: (m) => console.error(m),
    }),
    (s) => s.stop(),
  );
  scheduler.start();
  metrics.claims.cron = () => ({ won: scheduler.stats.fired, lost: scheduler.stats.lost });
  metrics.claimOwners.cron = scheduler.owner;
  // After a burst, the heap it grew to is given back once the process idles (V8 alone keeps it).
  const idleMemory = parts.use(
    "idle memory",
    new IdleMemory({ release: [() => readModels.runner.db.pragma("shrink_memory")], log: (m) => console.error(m) }),
    (m) => m.stop(),
  );
  idleMemory.start();
  const ttlSweeper = parts.use("thread TTL sweeper", new TtlSweeper({ ctx, lifecycle, clock, log: (m) => console.error(m) }), (s) => s.stop());
  ttlSweeper.start();
  // `checkpointer.ttl` with a `default_ttl`: threads idle that long deleted, or pruned to their latest checkpoints.
  const checkpointTtl = checkpointTtlSettings(ctx.langgraph.config.checkpointer?.ttl);
  if (checkpointTtl) {
    const sweeper = parts.use(
      "checkpoint TTL sweeper",
      new CheckpointTtlSweeper({
        ...checkpointTtl,
        ctx,
        checkpointer: async () => (await ctx.runtime()).checkpointer,
        clock,
        log: (m) => console.error(m),
      }),
      (s) => s.stop(),
    );
    sweeper.start();
  }
  startup.mark("schedulers");
  return { scheduler, ttlSweeper };
}
