import t from "tap";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { startTestServer, type TestServer } from "../support/server.js";
import { FakeClock } from "../support/fake-clock.js";
import { Receiver, deliveryEnd, writeWebhookConfig } from "../support/webhooks.js";
import { expectErrors } from "../support/http.js";
import { cronStream } from "../../src/domain/crons.js";
import { threadStream } from "../../src/domain/threads.js";
import { firstEventOf } from "../support/log.js";

/**
 * Crons end to end through the official SDK, with the scheduler on a fake clock: nothing waits for
 * the wall clock. Each tick fires once through the normal run pipeline (its webhook arrives).
 */

const input = { messages: [{ role: "user", content: "tick" }] };

/** Moves the clock and waits until every tick it made due is fired and recorded. */
async function moveTo(server: TestServer, clock: FakeClock, to: string): Promise<void> {
  clock.set(to);
  server.server.crons.wake();
  await server.server.crons.idle();
}

async function fired(server: TestServer, cronId: string): Promise<string[]> {
  const events = await server.server.store.readStream(cronStream(cronId));
  return events.filter((e) => e.type === "CronFired").map((e) => (e.data as { tick: string }).tick);
}

t.test("crons", async (t) => {
  const receiver = await new Receiver().start();
  t.teardown(() => receiver.close());
  const config = await writeWebhookConfig({ webhooks: { url: { disable_private_ips: false } } });
  const dataDir = await mkdtemp(path.join(os.tmpdir(), "crons-api-"));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const clock = new FakeClock(Date.parse("2026-01-01T00:02:00Z"));
  let server = await startTestServer({ env: { LANGGRAPH_JSON: config }, dataDir, deps: { clock } });
  t.teardown(() => server.server.close());

  t.test("bad requests: 422 naming the field, 404 for unknown assistant, thread, cron", async (t) => {
    const thread = await server.client.threads.create();
    await expectErrors(t, server.url, [
      ["POST", "/runs/crons", { assistant_id: "agent", schedule: "* * * *" }, 422, /^schedule: expected 5 fields/],
      ["POST", "/runs/crons", { assistant_id: "agent", schedule: "0 0 * * * *" }, 422, /^schedule: expected 5 fields .* got 6$/],
      ["POST", "/runs/crons", { assistant_id: "agent", schedule: "99 * * * *" }, 422, /^schedule: .*minute/],
      ["POST", "/runs/crons", { assistant_id: "agent", schedule: "* * * * *", timezone: "Nowhere/City" }, 422, /^timezone: unknown IANA time zone/],
      ["POST", "/runs/crons", { assistant_id: "agent" }, 422, /^body\.schedule/],
      ["POST", "/runs/crons", { assistant_id: "agent", schedule: "* * * * *", end_time: "tomorrow" }, 422, /^end_time/],
      ["POST", "/runs/crons", { assistant_id: "agent", schedule: "* * * * *", on_run_completed: "later" }, 422, /on_run_completed/],
      ["POST", "/runs/crons", { assistant_id: crypto.randomUUID(), schedule: "* * * * *" }, 404, /No assistant found/],
      ["POST", `/threads/${crypto.randomUUID()}/runs/crons`, { assistant_id: "agent", schedule: "* * * * *" }, 404, /Thread with ID .* not found/],
      ["POST", `/thread/${thread.thread_id}/runs/crons`, { assistant_id: "agent", schedule: "* * * * *", timezone: "X" }, 422, /^timezone/],
      ["PATCH", `/runs/crons/${crypto.randomUUID()}`, { enabled: false }, 404, /^Cron not found$/],
      ["DELETE", `/runs/crons/${crypto.randomUUID()}`, undefined, 404, /^Cron not found$/],
      ["POST", "/runs/crons/search", { sort_by: "color" }, 422, /sort_by/],
    ]);
  });

  t.test("a stateless cron: exact ticks, one run per tick on a new thread, its webhook, no catch-up of the same tick", async (t) => {
    const cron = await server.client.crons.create("agent", {
      schedule: "*/5 * * * *",
      input,
      webhook: `${receiver.url}/cron?token=t`,
      metadata: { kind: "stateless" },
    });
    t.match(cron, {
      schedule: "*/5 * * * *",
      timezone: "UTC",
      thread_id: null,
      on_run_completed: "delete",
      enabled: true,
      next_run_date: "2026-01-01T00:05:00.000+00:00",
      metadata: { kind: "stateless" },
      payload: { input },
    });
    await moveTo(server, clock, "2026-01-01T00:04:59Z");
    t.same(await fired(server, cron.cron_id), [], "not before its tick");
    await moveTo(server, clock, "2026-01-01T00:05:00Z");
    t.same(await fired(server, cron.cron_id), ["2026-01-01T00:05:00.000+00:00"]);
    const got = await receiver.nth(1);
    t.equal(got.url, "/cron?token=t");
    const body = JSON.parse(got.body);
    t.match(body, { status: "success", kwargs: { input }, values: { messages: [{ content: "tick" }, { type: "ai" }] } });
    await deliveryEnd(server.server.store, body.run_id);
    await moveTo(server, clock, "2026-01-01T00:05:30Z");
    await moveTo(server, clock, "2026-01-01T00:10:00Z");
    await moveTo(server, clock, "2026-01-01T00:15:00Z");
    t.same(
      await fired(server, cron.cron_id),
      ["00:05", "00:10", "00:15"].map((m) => `2026-01-01T${m}:00.000+00:00`),
      "each tick once",
    );
    const created = (await server.server.store.readStream(cronStream(cron.cron_id)))
      .filter((e) => e.type === "CronRunCreated")
      .map((e) => e.data as { thread_id: string });
    t.equal(new Set(created.map((c) => c.thread_id)).size, 3, "a new thread per tick");
    // on_run_completed "delete" (the default): each tick's thread is deleted once its run ended.
    for (const { thread_id } of created) {
      const deleted = await firstEventOf(server.server.store, threadStream(thread_id), ["ThreadDeleted"]);
      const events = await server.server.store.readStream(threadStream(thread_id));
      t.ok(events.some((e) => e.type === "ThreadCreated") && deleted.revision === events.at(-1)!.revision, "the tick's thread was created, then deleted last");
      await t.rejects(server.client.threads.get(thread_id), /404/, "the tick's thread is gone");
    }
    const [found] = await server.client.crons.search({ assistantId: "agent", metadata: { kind: "stateless" } });
    t.equal(found.next_run_date, "2026-01-01T00:20:00.000+00:00");
    await server.client.crons.delete(cron.cron_id);
    await moveTo(server, clock, "2026-01-01T00:20:00Z");
    t.same((await fired(server, cron.cron_id)).length, 3, "deleted: the scheduler stops");
  });

  t.test("a thread cron: runs on its thread; search, count, select, patch, disable, end_time", async (t) => {
    const thread = await server.client.threads.create();
    const cron = await server.client.crons.createForThread(thread.thread_id, "agent", { schedule: "0 * * * *", input, metadata: { kind: "thread" } });
    t.match(cron, { thread_id: thread.thread_id, next_run_date: "2026-01-01T01:00:00.000+00:00", on_run_completed: null });
    await moveTo(server, clock, "2026-01-01T01:00:00Z");
    const runs = await server.client.runs.list(thread.thread_id);
    t.equal(runs.length, 1, "the tick's run is on the thread");
    await server.client.runs.join(thread.thread_id, runs[0].run_id);
    t.equal(await server.client.crons.count({ threadId: thread.thread_id }), 1);
    t.equal(await server.client.crons.count({ metadata: { kind: "thread" } }), 1);
    const selected = await server.client.crons.search({ threadId: thread.thread_id, select: ["cron_id", "next_run_date"] });
    t.same(selected, [{ cron_id: cron.cron_id, next_run_date: "2026-01-01T02:00:00.000+00:00" }]);
    // Minute 30 in Kolkata (UTC+5:30) is minute 0 in UTC; ticks count from the change (01:00 UTC), strictly after it.
    const patched = await server.client.crons.update(cron.cron_id, { schedule: "30 * * * *", timezone: "Asia/Kolkata", endTime: "2026-01-01T03:00:00Z" });
    t.match(patched, {
      schedule: "30 * * * *",
      timezone: "Asia/Kolkata",
      end_time: "2026-01-01T03:00:00.000+00:00",
      next_run_date: "2026-01-01T02:00:00.000+00:00",
    });
    await moveTo(server, clock, "2026-01-01T02:00:00Z");
    await moveTo(server, clock, "2026-01-01T03:00:00Z");
    t.same(
      await fired(server, cron.cron_id),
      ["01:00", "02:00", "03:00"].map((h) => `2026-01-01T${h}:00.000+00:00`),
    );
    const [ended] = await server.client.crons.search({ threadId: thread.thread_id });
    t.equal(ended.next_run_date, null, "past end_time: no next run");
    await moveTo(server, clock, "2026-01-01T05:00:00Z");
    t.equal((await fired(server, cron.cron_id)).length, 3, "the scheduler stops at end_time");
    const disabled = await server.client.crons.update(cron.cron_id, { endTime: null as unknown as string, enabled: false });
    t.match(disabled, { enabled: false, end_time: null, next_run_date: null });
    await moveTo(server, clock, "2026-01-01T06:00:00Z");
    t.equal((await fired(server, cron.cron_id)).length, 3, "disabled: nothing fires");
    t.equal(await server.client.crons.count({ threadId: thread.thread_id }), 1);
    const enabledOnly = await server.client.crons.search({ threadId: thread.thread_id, enabled: true });
    t.same(enabledOnly, []);
    await server.client.crons.delete(cron.cron_id);
  });

  t.test("DST through the API: 02:30 Berlin on the spring-forward day fires at 03:00 local", async (t) => {
    await moveTo(server, clock, "2026-03-28T00:00:00Z");
    const cron = await server.client.crons.create("agent", { schedule: "30 2 * * *", timezone: "Europe/Berlin", input });
    t.equal(cron.next_run_date, "2026-03-28T01:30:00.000+00:00", "CET: 02:30 is 01:30 UTC");
    await moveTo(server, clock, "2026-03-28T01:30:00Z");
    const [after] = await server.client.crons.search({ assistantId: "agent", sortBy: "created_at", sortOrder: "desc", limit: 1 });
    t.equal(after.next_run_date, "2026-03-29T01:00:00.000+00:00", "the skipped 02:30 → 03:00 CEST = 01:00 UTC");
    await moveTo(server, clock, "2026-03-29T01:00:00Z");
    const [later] = await server.client.crons.search({ assistantId: "agent", sortBy: "created_at", sortOrder: "desc", limit: 1 });
    t.equal(later.next_run_date, "2026-03-30T00:30:00.000+00:00", "CEST: 02:30 is 00:30 UTC");
    t.same(await fired(server, cron.cron_id), ["2026-03-28T01:30:00.000+00:00", "2026-03-29T01:00:00.000+00:00"]);
    await server.client.crons.delete(cron.cron_id);
  });

  t.test("restart: missed ticks fire on start within the catch-up window (default: the latest only), never twice", async (t) => {
    await moveTo(server, clock, "2026-04-01T00:00:30Z");
    const cron = await server.client.crons.create("agent", { schedule: "* * * * *", input, onRunCompleted: "keep" });
    await server.server.close();
    clock.set("2026-04-01T00:10:30Z");
    server = await startTestServer({ env: { LANGGRAPH_JSON: config }, dataDir, deps: { clock } });
    await server.server.crons.idle();
    t.same(await fired(server, cron.cron_id), ["2026-04-01T00:10:00.000+00:00"], "only the latest missed tick");
    await server.server.close();
    server = await startTestServer({ env: { LANGGRAPH_JSON: config }, dataDir, deps: { clock } });
    await server.server.crons.idle();
    t.same((await fired(server, cron.cron_id)).length, 1, "not fired again by the next start");
    await server.server.close();
    clock.set("2026-04-01T00:13:30Z");
    server = await startTestServer({ env: { LANGGRAPH_JSON: config, CRON_CATCHUP_SECS: "150" }, dataDir, deps: { clock } });
    await server.server.crons.idle();
    t.same(
      await fired(server, cron.cron_id),
      ["00:10", "00:11", "00:12", "00:13"].map((m) => `2026-04-01T${m}:00.000+00:00`),
      "a 150 s window (from 00:11:00): every missed tick within it, in order",
    );
    await server.server.crons.stop();
    await server.client.crons.delete(cron.cron_id);
  });
});
