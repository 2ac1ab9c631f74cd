import http from "node:http";
import type { AddressInfo } from "node:net";
import t from "tap";
import { startEsdbTestDouble } from "../support/esdb-test-double.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { FakeClock } from "../support/fake-clock.js";
import { Receiver, deliveryEnd, writeWebhookConfig } from "../support/webhooks.js";
import { cronStream } from "../../src/domain/crons.js";
import { webhookStream } from "../../src/domain/webhooks.js";

/**
 * Two servers on one EventStoreDB (the test double: the real client over an in-memory log), each
 * with its own read-model database and scheduler, on one fake clock: every cron tick fires once
 * and every webhook is claimed and sent by exactly one of them.
 */

t.test("two servers on one EventStoreDB", async (t) => {
  const esdb = await startEsdbTestDouble();
  t.teardown(() => esdb.close());
  const receiver = await new Receiver().start();
  t.teardown(() => receiver.close());
  const config = await writeWebhookConfig({ webhooks: { url: { disable_private_ips: false } } });
  const clock = new FakeClock(Date.parse("2026-06-01T00:00:30Z"));
  const env = { EVENTSTORE_URL: esdb.connectionString, LANGGRAPH_JSON: config };
  const servers: TestServer[] = [];
  for (let i = 0; i < 2; i++) servers.push(await startTestServer({ env, deps: { clock } }));
  t.teardown(async () => {
    for (const s of servers) await s.close();
  });
  const [a, b] = servers;
  const store = a.server.store;

  t.test("each cron tick fires once", async (t) => {
    const crons = [];
    for (let i = 0; i < 3; i++)
      crons.push(await a.client.crons.create("agent", { schedule: "* * * * *", input: { messages: [{ role: "user", content: `c${i}` }] } }));
    // Both schedulers must know the crons before the clock moves.
    await b.server.readModels.runner.waitFor(await store.headPosition());
    for (const minute of ["01", "02", "03", "04"]) {
      clock.set(`2026-06-01T00:${minute}:00Z`);
      await Promise.all(servers.map((s) => s.server.crons.idle()));
    }
    const owners = new Set<string>();
    for (const cron of crons) {
      const events = await store.readStream(cronStream(cron.cron_id));
      const fired = events.filter((e) => e.type === "CronFired").map((e) => e.data as { tick: string; owner: string });
      t.same(
        fired.map((f) => f.tick),
        ["01", "02", "03", "04"].map((m) => `2026-06-01T00:${m}:00.000+00:00`),
        "each tick once, in order",
      );
      t.equal(events.filter((e) => e.type === "CronRunCreated").length, 4, "one run per tick");
      for (const f of fired) owners.add(f.owner);
    }
    t.comment(`ticks fired by ${owners.size} scheduler(s)`);
    const stats = servers.map((s) => s.server.crons.stats);
    t.equal(stats[0].fired + stats[1].fired, 12, "12 ticks fired in all");
    t.ok(stats[0].lost + stats[1].lost > 0, `both schedulers tried: ${JSON.stringify(stats)}`);
    for (const cron of crons) await b.client.crons.delete(cron.cron_id);
  });

  t.test("each webhook is sent by one server", async (t) => {
    const before = receiver.requests.length;
    const runs = [];
    for (let i = 0; i < 8; i++) {
      const client = (i % 2 ? a : b).client;
      runs.push(await client.runs.create(null, "agent", { input: { messages: [{ role: "user", content: `w${i}` }] }, webhook: `${receiver.url}/esdb/${i}` }));
    }
    for (const r of runs) t.equal((await deliveryEnd(store, r.run_id)).type, "WebhookDelivered");
    const got = receiver.requests.slice(before);
    t.equal(got.length, 8, "one request per run");
    t.equal(new Set(got.map((r) => r.url)).size, 8);
    const claimers = new Set<string>();
    for (const r of runs) {
      const claims = (await store.readStream(webhookStream(r.run_id))).filter((e) => e.type === "WebhookClaimed");
      t.equal(claims.length, 1, "claimed once");
      claimers.add((claims[0].data as { owner: string }).owner);
    }
    t.comment(`deliveries sent by ${claimers.size} server(s)`);
    const stats = [a, b].map((s) => s.server.webhooks!.stats);
    t.equal(stats[0].claimed + stats[1].claimed, 8, `one claim won per delivery: ${JSON.stringify(stats)}`);
    t.ok(stats[0].lost + stats[1].lost > 0, "the other server really tried, and lost");
  });

  t.test("a dead sender's delivery is taken over after its lease", async (t) => {
    // Two more servers with a short attempt timeout and lease; the receiver does not answer the first request.
    const shortLease = { ...env, WEBHOOK_TIMEOUT_MS: "5000", WEBHOOK_LEASE_MS: "5500" };
    const c = await startTestServer({ env: shortLease, deps: { clock } });
    const d = await startTestServer({ env: shortLease, deps: { clock } });
    t.teardown(async () => {
      await c.close();
      await d.close();
    });
    let answer = false;
    let hold!: () => void;
    const held = new Promise<void>((r) => (hold = r));
    const silentFirst = http.createServer((req, res) => {
      req.resume().on("end", () => {
        if (answer) res.writeHead(200).end();
        else hold();
      });
    });
    await new Promise<void>((r) => silentFirst.listen(0, "127.0.0.1", r));
    t.teardown(() => {
      silentFirst.closeAllConnections();
      silentFirst.close();
    });
    // a and b take no part: only c and d deliver.
    await a.server.webhooks!.stop();
    await b.server.webhooks!.stop();
    const run = await c.client.runs.create(null, "agent", {
      input: { messages: [{ role: "user", content: "lease" }] },
      webhook: `http://127.0.0.1:${(silentFirst.address() as AddressInfo).port}/lease`,
    });
    await held;
    const [claim] = (await store.readStream(webhookStream(run.run_id))).filter((e) => e.type === "WebhookClaimed");
    const owner = (claim.data as { owner: string }).owner;
    const [dead, survivor] = c.server.webhooks!.owner === owner ? [c, d] : [d, c];
    answer = true;
    await dead.server.close(); // its claim stays open in the log
    const end = await deliveryEnd(store, run.run_id);
    t.equal(end.type, "WebhookDelivered");
    const events = await store.readStream(webhookStream(run.run_id));
    const claims = events.filter((e) => e.type === "WebhookClaimed").map((e) => e.data as { owner: string; claimed_at: string; lease_expires_at: number });
    t.same(
      claims.map((x) => x.owner),
      [owner, survivor.server.webhooks!.owner],
      "claimed again by the other server",
    );
    t.ok(Date.parse(claims[1].claimed_at) >= claims[0].lease_expires_at - 5, "only after the first lease lapsed");
    t.same(
      events.filter((e) => e.type === "WebhookAttempted").map((e) => (e.data as { owner: string }).owner),
      [survivor.server.webhooks!.owner],
      "the dead sender recorded nothing",
    );
  });
});
