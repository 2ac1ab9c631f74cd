import { randomUUID } from "node:crypto";
import t, { type Test } from "tap";
import { CronScheduler } from "../../src/app/cron-scheduler.js";
import { cronStream, isoOf, UNRECORDED_TICK_GRACE_MS } from "../../src/domain/crons.js";
import type { EventStore } from "../../src/eventstore/types.js";
import { FakeClock } from "../support/fake-clock.js";
import { logWithReadModels } from "../support/log-with-read-models.js";

/**
 * Two processes catching up on missed cron ticks at once (after a log outage, found by
 * test/e2e/chaos-cluster.test.ts): another process fires the next tick between this scheduler's claim
 * of a tick and the record of its run. The scheduler must not then claim that next tick again
 * against the stream's new revision; every tick fires once.
 */

const minute = (m: number) => Date.parse(`2026-06-01T00:0${m}:00Z`);

/** A SQLite log with its read models in a temporary directory, holding one cron (created 00:00:30) the read models show. */
async function logWithCron(t: Test, schedule: string) {
  const { store, readModels } = await logWithReadModels(t, "cron-race-", { synchronous: "NORMAL" });
  const cronId = randomUUID();
  const created = await store.append(
    cronStream(cronId),
    [
      {
        type: "CronCreated",
        data: {
          cron_id: cronId,
          created_at: "2026-06-01T00:00:30.000Z",
          assistant_id: "agent",
          thread_id: null,
          schedule,
          timezone: "UTC",
          end_time: null,
          enabled: true,
          on_run_completed: null,
          metadata: {},
          user_id: null,
          payload: {},
        },
      },
    ],
    "no_stream",
  );
  await readModels.runner.waitFor(created.position);
  return { store, readModels, cronId };
}

t.test("a tick fired by another process between our claim and our record is not fired again", async (t) => {
  const { store, readModels, cronId } = await logWithCron(t, "* * * * *");

  // The other process fires minute 2 just before our record of minute 1 lands.
  let interposed = false;
  const racing = new Proxy(store, {
    get(target, prop, receiver) {
      if (prop !== "append") {
        const value = Reflect.get(target, prop, receiver) as unknown;
        return typeof value === "function" ? value.bind(target) : value;
      }
      return async (...args: Parameters<EventStore["append"]>) => {
        if (!interposed && args[1][0]?.type === "CronRunCreated") {
          interposed = true;
          await target.append(args[0], [{ type: "CronFired", data: { tick: isoOf(minute(2)), owner: "other", fired_at: isoOf(minute(2)) } }], "any");
        }
        return target.append(...args);
      };
    },
  });
  const clock = new FakeClock(Date.parse("2026-06-01T00:03:10Z"));
  let runs = 0;
  const scheduler = new CronScheduler({
    store: racing,
    readModels,
    clock,
    catchUpMs: 3_600_000,
    owner: "me",
    startRun: async () => ({ run_id: `run-${++runs}`, thread_id: randomUUID() }),
  });
  scheduler.start();
  t.teardown(() => scheduler.stop());
  // Minutes 1, 2 and 3 are all due: the catch-up fires them in one pass, unless the stream moved.
  await scheduler.idle();
  t.ok(interposed, "the other process fired in between");
  const fired = (await store.readStream(cronStream(cronId))).filter((e) => e.type === "CronFired").map((e) => e.data as { tick: string; owner: string });
  t.same(
    fired.map((f) => [f.tick, f.owner]),
    [
      [isoOf(minute(1)), "me"],
      [isoOf(minute(2)), "other"],
      [isoOf(minute(3)), "me"],
    ],
    "every tick fired once",
  );
  t.equal(runs, 2, "one run per tick this scheduler fired");
});

/**
 * A process that claimed a tick (CronFired) and died before creating and recording its run: once
 * UNRECORDED_TICK_GRACE_MS have passed, another process creates that tick's run (keyed by the
 * tick, so one run whoever creates it) and records it; two processes completing it record it once.
 */
t.test("a tick whose claimer died before recording its run is completed by another process, once", async (t) => {
  const { store, readModels, cronId } = await logWithCron(t, "0 0 1 1 *");
  // The dead process claimed a tick at 00:01:00 and never recorded its run.
  const orphanTick = minute(1);
  const fired = await store.append(
    cronStream(cronId),
    [{ type: "CronFired", data: { tick: isoOf(orphanTick), owner: "dead", fired_at: isoOf(minute(1)) } }],
    0n,
  );
  await readModels.runner.waitFor(fired.position);
  t.same(readModels.crons.get(cronId)?.unrecorded_ticks, [{ tick_ms: orphanTick, fired_at_ms: minute(1) }], "the read model knows the unrecorded tick");

  const clock = new FakeClock(minute(1) + 30_000);
  const started: { owner: string; tick: number }[] = [];
  const schedulerOf = (owner: string) =>
    new CronScheduler({
      store,
      readModels,
      clock,
      catchUpMs: 3_600_000,
      owner,
      startRun: async (_cron, tick) => {
        started.push({ owner, tick });
        return { run_id: `run-of-${tick}`, thread_id: randomUUID() };
      },
    });
  const [a, b] = [schedulerOf("a"), schedulerOf("b")];
  a.start();
  b.start();
  t.teardown(async () => {
    await a.stop();
    await b.stop();
  });
  await Promise.all([a.idle(), b.idle()]);
  t.same(started, [], "within the grace, the claimer may still record it: nothing is created");

  await clock.advance(UNRECORDED_TICK_GRACE_MS);
  a.wake();
  b.wake();
  await Promise.all([a.idle(), b.idle()]);
  t.ok(
    started.length >= 1 && started.every((s) => s.tick === orphanTick),
    `the orphan tick's run was created (${started.length} attempt(s), keyed by the tick)`,
  );
  const records = (await store.readStream(cronStream(cronId)))
    .filter((e) => e.type === "CronRunCreated")
    .map((e) => e.data as { tick: string; run_id: string; thread_id: string });
  t.same(records, [{ tick: isoOf(orphanTick), run_id: `run-of-${orphanTick}`, thread_id: records[0]?.thread_id }], "recorded once");
  t.equal(a.stats.completed + b.stats.completed, 1, "one process completed it");
  t.same(readModels.crons.get(cronId)?.unrecorded_ticks, [], "nothing left unrecorded");
  t.equal((await store.readStream(cronStream(cronId))).filter((e) => e.type === "CronFired").length, 1, "no tick fired again");
});
