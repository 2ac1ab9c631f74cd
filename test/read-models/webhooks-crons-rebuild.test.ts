import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import t from "tap";
import Database from "better-sqlite3";
import type { EventStore } from "../../src/eventstore/types.js";
import { openReadModels, READ_MODELS_FILE } from "../../src/read-models/all.js";
import { startTestServer } from "../support/server.js";
import { FakeClock } from "../support/fake-clock.js";
import { Receiver, deliveryEnd, writeWebhookConfig } from "../support/webhooks.js";

/** The webhook and cron tables rebuilt from position 0 equal the incrementally built ones, row for row. */

async function runEnded(store: EventStore, runId: string): Promise<void> {
  const sub = store.subscribeToStream(`run-${runId}`);
  try {
    for await (const item of sub) if (item.kind === "event" && item.event.type === "RunEnded") return;
  } finally {
    await sub.close();
  }
}

function rows(file: string, table: string): unknown[] {
  const db = new Database(file, { readonly: true });
  try {
    return db.prepare(`SELECT * FROM ${table} ORDER BY 1`).all();
  } finally {
    db.close();
  }
}

t.test("rebuild equals incremental: webhook_deliveries and crons", async (t) => {
  const receiver = await new Receiver().start();
  t.teardown(() => receiver.close());
  const config = await writeWebhookConfig({ webhooks: { url: { disable_private_ips: false } } });
  const clock = new FakeClock(Date.parse("2026-02-01T00:00:30Z"));
  const srv = await startTestServer({ env: { LANGGRAPH_JSON: config, WEBHOOK_RETRY_BASE_MS: "10" }, deps: { clock } });
  t.teardown(() => srv.close());
  const { client } = srv;
  const input = { messages: [{ role: "user", content: "x" }] };

  receiver.script.push({ status: 500 }, { status: 404 });
  const runs = [];
  for (const path of ["/retried", "/refused", "/ok"]) runs.push(await client.runs.create(null, "agent", { input, webhook: `${receiver.url}${path}` }));
  for (const r of runs) await deliveryEnd(srv.server.store, r.run_id);
  const keep = await client.crons.create("agent", { schedule: "* * * * *", input });
  const patched = await client.crons.create("agent", { schedule: "*/2 * * * *", input });
  const gone = await client.crons.create("agent", { schedule: "* * * * *", input });
  clock.set("2026-02-01T00:02:00Z");
  srv.server.crons.wake();
  await srv.server.crons.idle();
  await client.crons.update(patched.cron_id, { schedule: "0 * * * *", metadata: { p: 1 } });
  await client.crons.delete(gone.cron_id);
  t.ok(keep.cron_id);
  // The ticks' runs end before the comparison, so that the log no longer moves.
  for (const cron of [keep, patched, gone]) {
    for (const e of await srv.server.store.readStream(`cron-${cron.cron_id}`)) {
      if (e.type === "CronRunCreated") await runEnded(srv.server.store, (e.data as { run_id: string }).run_id);
    }
  }
  // …and the read models show everything (the last event of a run stream is folded).
  await srv.server.readModels.runner.waitFor((await srv.server.store.readAll({ filter: srv.server.readModels.runner.eventFilter })).at(-1)!.position);

  const rebuiltDir = await mkdtemp(path.join(os.tmpdir(), "webhooks-crons-rebuild-"));
  t.teardown(() => rm(rebuiltDir, { recursive: true, force: true }));
  const rebuilt = openReadModels(rebuiltDir);
  await rebuilt.runner.start(srv.server.store);
  t.equal(rebuilt.runner.position, srv.server.readModels.runner.position);
  await rebuilt.runner.close();
  await srv.server.close();
  const live = path.join(srv.dataDir, READ_MODELS_FILE);
  const again = path.join(rebuiltDir, READ_MODELS_FILE);
  for (const table of ["webhook_deliveries", "crons"]) {
    const a = rows(live, table);
    t.ok(a.length >= 2, `${table} has rows (${a.length})`);
    t.same(rows(again, table), a, `${table}: same rows`);
  }
  const statuses = (rows(live, "webhook_deliveries") as { status: string }[]).map((r) => r.status).sort();
  t.same(statuses, ["delivered", "delivered", "failed"], "retried and delivered, refused by a 404, delivered");
});
