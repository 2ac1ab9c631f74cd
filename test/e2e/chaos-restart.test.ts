import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import t from "tap";
import { Client } from "@langchain/langgraph-sdk";
import { startEsdbTestDouble, type EsdbTestDouble } from "../support/esdb-test-double.js";
import { spawnServer } from "../support/process.js";
import { human, roundTrip, within } from "../support/esdb-outage.js";
import { Receiver, deliveryEnd, writeWebhookConfig } from "../support/webhooks.js";
import { firstEventOf } from "../support/log.js";
import { allSettled, runLog, sleep } from "../support/chaos.js";
import { gates as makeGates } from "../support/gates.js";
import { openStore } from "../../src/eventstore/open.js";
import { runStream } from "../../src/domain/runs.js";
import { webhookStream } from "../../src/domain/webhooks.js";

/**
 * EventStoreDB restarts (an upgrade, a crash) on the same data while a server process has runs in
 * flight and webhooks pending: `/ok` says so within 5 s, the server serves again within 5 s of the
 * log's return, every run ends, and every webhook is delivered at least once, each delivery under
 * one `X-Webhook-Id` (its retries share it; distinct deliveries differ).
 */

t.setTimeout(90_000);

const DOWN_MS = 3_000;

t.test("a restart of EventStoreDB with runs in flight and webhooks pending", async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), "chaos-restart-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const dataFile = path.join(dir, "esdb.jsonl");
  let esdb: EsdbTestDouble = await startEsdbTestDouble({ dataFile });
  t.teardown(() => esdb.close());
  const receiver = await new Receiver().start();
  t.teardown(() => receiver.close());
  const config = await writeWebhookConfig({ webhooks: { url: { disable_private_ips: false } } });
  const proc = await spawnServer({
    EVENTSTORE_URL: esdb.connectionString,
    LANGGRAPH_JSON: config,
    DATA_DIR: path.join(dir, "server"),
    N_JOBS_PER_WORKER: "20",
    // A refused attempt is tried again 3.2 to 4.8 s later: during the outage or after it.
    WEBHOOK_RETRY_BASE_MS: "4000",
    WEBHOOK_RETRY_MAX_MS: "4000",
  });
  t.teardown(async () => {
    if (proc.child.exitCode === null && proc.child.signalCode === null) proc.child.kill("SIGTERM");
    await proc.exited;
  });
  t.ok(proc.url, `server started ${proc.stderr}`);
  const url = proc.url!;
  const client = new Client({ apiUrl: url });
  const log = await openStore({ dataDir: "", eventstoreUrl: esdb.connectionString });
  t.teardown(() => log.close());
  await roundTrip(url, "before");

  // Pending webhooks: the receiver refuses every request until the log is back (then they are retried).
  const REFUSALS = 200;
  receiver.script.push(...Array.from({ length: REFUSALS }, () => ({ status: 503 })));
  const quick = [];
  for (let i = 0; i < 5; i++) {
    const thread = await client.threads.create();
    quick.push(await client.runs.create(thread.thread_id, "agent", { input: { messages: [human(`q${i}`)] }, webhook: `${receiver.url}/hook/quick-${i}` }));
  }
  await receiver.nth(5);
  // Runs in flight: ten runs held at their gates; half end during the outage, the others after it.
  const gates = makeGates(t);
  const slow = [];
  for (let i = 0; i < 10; i++) {
    const thread = await client.threads.create();
    slow.push(
      await client.runs.create(thread.thread_id, "delay", {
        input: { gate: gates.path(`s${i}`), messages: [human(`s${i}`)] },
        webhook: `${receiver.url}/hook/slow-${i}`,
      }),
    );
  }
  await allSettled(slow.map((r) => firstEventOf(log, runStream(r.run_id), ["RunClaimed"])));
  const all = [...quick, ...slow];
  const pending = await allSettled(quick.map(async (r) => (await log.readStream(webhookStream(r.run_id))).map((e) => e.type)));
  t.same(
    pending.map((types) => types.filter((type) => type === "WebhookDelivered").length),
    quick.map(() => 0),
    "the five refused webhooks are pending when the log stops",
  );
  t.equal((await allSettled(slow.map((r) => runLog(log, r.run_id)))).filter((l) => l.ends > 0).length, 0, "the ten slow runs are in flight when the log stops");

  await esdb.stop();
  const stoppedAt = Date.now();
  const noticed = await within(5_000, "/ok non-200 after the stop", async () => (await fetch(`${url}/ok`)).status !== 200);
  t.ok(noticed <= 5_000, `/ok said not ok ${noticed} ms after the stop`);
  for (let i = 0; i < slow.length; i += 2) gates.open(`s${i}`);
  // Down for 3 s: a duration, not a synchronisation.
  await sleep(DOWN_MS - (Date.now() - stoppedAt));
  esdb = await startEsdbTestDouble({ dataFile, port: esdb.port });
  for (let i = 1; i < slow.length; i += 2) gates.open(`s${i}`);

  const recovered = await within(5_000, "round trip after the restart", async () => {
    await roundTrip(url, "after");
    return true;
  });
  t.ok(recovered <= 5_000, `served again ${recovered} ms after the restart`);
  // The receiver answers again: the pending deliveries go through on their next attempt.
  const refused = REFUSALS - receiver.script.length;
  receiver.script.length = 0;
  for (let i = 0; i < 5; i++) await t.resolves(roundTrip(url, `again ${i}`), `round trip ${i + 1} of 5 after the receiver recovered`);

  const ends = await allSettled(all.map((r) => firstEventOf(log, runStream(r.run_id), ["RunEnded"])));
  t.same(
    ends.map((e) => (e.data as { status: string }).status),
    all.map(() => "success"),
    "every run ended, with success",
  );
  const logs = await allSettled(all.map((r) => runLog(log, r.run_id)));
  t.same(
    logs.map((l) => [l.claims, l.ends]),
    all.map(() => [1, 1]),
    "each claimed and ended once",
  );
  const deliveries = await allSettled(all.map((r) => deliveryEnd(log, r.run_id)));
  t.same(
    deliveries.map((d) => d.type),
    all.map(() => "WebhookDelivered"),
    "every webhook delivered",
  );

  // What the receiver saw: each delivery at least once, every request of one delivery under its one id.
  const hooks = all.map((_, i) => (i < quick.length ? `/hook/quick-${i}` : `/hook/slow-${i - quick.length}`));
  const idsPerHook = hooks.map((hook) => [...new Set(receiver.requests.filter((r) => r.url === hook).map((r) => r.headers["x-webhook-id"]))]);
  t.same(
    idsPerHook.map((ids) => ids.length),
    hooks.map(() => 1),
    "one X-Webhook-Id per delivery, shared by its retries",
  );
  t.equal(new Set(idsPerHook.flat()).size, hooks.length, "distinct deliveries have distinct ids");
  t.ok(
    idsPerHook.every((ids) => typeof ids[0] === "string" && ids[0].length > 0),
    "every request carries an id",
  );
  const retried = hooks.filter((hook) => receiver.requests.filter((r) => r.url === hook).length > 1);
  t.ok(
    quick.every((_, i) => retried.includes(`/hook/quick-${i}`)),
    "the five refused deliveries were sent again after the restart",
  );
  for (const r of quick) {
    const attempts = (await log.readStream(webhookStream(r.run_id))).filter((e) => e.type === "WebhookAttempted");
    t.same(new Set(attempts.map((e) => (e.data as { delivery_id: string }).delivery_id)).size, 1, "its attempts in the log name one delivery id");
  }
  t.equal(receiver.requests.length, hooks.length + refused, `one delivered request per webhook, after ${refused} refused ones`);
});
