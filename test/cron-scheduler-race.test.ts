import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import t from "tap";
import { openSqliteStore } from "../src/eventstore/sqlite.js";
import { withSchemas } from "../src/eventstore/validating.js";
import { schemaForEventType } from "../src/domain/events.js";
import { openReadModels } from "../src/read-models/all.js";
import { CronScheduler } from "../src/app/cron-scheduler.js";
import { cronStream, isoOf } from "../src/domain/crons.js";
import type { EventStore } from "../src/eventstore/types.js";
import { FakeClock } from "./support/fake-clock.js";

/**
 * Two processes catching up on missed cron ticks at once (after a log outage, found by
 * test/chaos-cluster.test.ts): another process fires the next tick between this scheduler's claim
 * of a tick and the record of its run. The scheduler must not then claim that next tick again
 * against the stream's new revision; every tick fires once.
 */

const minute = (m: number) => Date.parse(`2026-06-01T00:0${m}:00Z`);

t.test("a tick fired by another process between our claim and our record is not fired again", async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), "cron-race-"));
  const store = withSchemas(await openSqliteStore({ path: path.join(dir, "events.sqlite"), synchronous: "NORMAL" }), schemaForEventType);
  const readModels = openReadModels(dir);
  await readModels.runner.start(store);
  t.teardown(async () => {
    await readModels.runner.close();
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });
  const cronId = randomUUID();
  const created = await store.append(cronStream(cronId), [{
    type: "CronCreated",
    data: {
      cron_id: cronId, created_at: "2026-06-01T00:00:30.000Z", assistant_id: "agent", thread_id: null, schedule: "* * * * *", timezone: "UTC",
      end_time: null, enabled: true, on_run_completed: null, metadata: {}, user_id: null, payload: {},
    },
  }], "no_stream");
  await readModels.runner.waitFor(created.position);

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
    store: racing, readModels, clock, catchUpMs: 3_600_000, owner: "me",
    startRun: async () => ({ run_id: `run-${++runs}`, thread_id: randomUUID() }),
  });
  scheduler.start();
  t.teardown(() => scheduler.stop());
  // Minutes 1, 2 and 3 are all due: the catch-up fires them in one pass, unless the stream moved.
  await scheduler.idle();
  t.ok(interposed, "the other process fired in between");
  const fired = (await store.readStream(cronStream(cronId))).filter((e) => e.type === "CronFired").map((e) => e.data as { tick: string; owner: string });
  t.same(fired.map((f) => [f.tick, f.owner]), [[isoOf(minute(1)), "me"], [isoOf(minute(2)), "other"], [isoOf(minute(3)), "me"]], "every tick fired once");
  t.equal(runs, 2, "one run per tick this scheduler fired");
});
