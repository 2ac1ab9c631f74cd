import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import t from "tap";
import { Client } from "@langchain/langgraph-sdk";
import { spawnServer } from "../support/process.js";
import { Receiver, writeWebhookConfig } from "../support/webhooks.js";

/**
 * At least once across a crash: the receiver is down, the server retries, is killed with SIGKILL,
 * and a new process on the same data directory finds the pending delivery in its read model and
 * delivers it once the receiver is up, with the same delivery id.
 */

interface Entry {
  event: string;
  attempt?: number;
  status_code?: number;
  error?: string;
  delivery_id?: string;
}

/** Reads the delivery log until `done` holds (the log lives in another process: no event to await here). */
async function logUntil(url: string, runId: string, done: (log: Entry[]) => boolean): Promise<Entry[]> {
  for (let i = 0; ; i++) {
    const log = (await (await fetch(`${url}/runs/${runId}/webhooks`)).json()) as Entry[];
    if (done(log) || i > 600) return log;
    await new Promise((r) => setTimeout(r, 50));
  }
}

t.test("receiver down, server killed with -9 and restarted, receiver up: the delivery arrives", async (t) => {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), "webhooks-recovery-"));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const config = await writeWebhookConfig({ webhooks: { url: { disable_private_ips: false } } });
  const env = { DATA_DIR: dataDir, LANGGRAPH_JSON: config, WEBHOOK_RETRY_BASE_MS: "200", WEBHOOK_RETRY_MAX_MS: "400", WEBHOOK_MAX_ATTEMPTS: "100" };

  // Reserve a port, then leave it closed: the receiver is down.
  const probe = await new Receiver().start();
  const port = probe.port;
  await probe.close();

  const first = await spawnServer(env);
  t.ok(first.url, `started: ${first.stderr}`);
  const client = new Client({ apiUrl: first.url! });
  const thread = await client.threads.create();
  const webhook = `http://127.0.0.1:${port}/hook?token=abc`;
  const run = await client.runs.create(thread.thread_id, "agent", { input: { messages: [{ role: "user", content: "x" }] }, webhook });
  await client.runs.join(thread.thread_id, run.run_id);
  const failing = await logUntil(first.url!, run.run_id, (log) => log.length >= 2);
  t.ok(failing.length >= 2, "attempts fail while the receiver is down");
  t.match(failing[0], { event: "attempt", attempt: 1, error: /ECONNREFUSED/ });

  first.child.kill("SIGKILL");
  t.equal((await first.exited).signal, "SIGKILL");

  const receiver = await new Receiver().start(port);
  t.teardown(() => receiver.close());
  const second = await spawnServer(env);
  t.ok(second.url, `restarted: ${second.stderr}`);
  t.teardown(async () => {
    second.child.kill("SIGTERM");
    await second.exited;
  });

  const got = await receiver.nth(1);
  t.equal(got.url, "/hook?token=abc");
  t.equal(JSON.parse(got.body).run_id, run.run_id);
  const log = await logUntil(second.url!, run.run_id, (l) => l.some((e) => e.event === "delivered"));
  const attempts = log.filter((e) => e.event === "attempt");
  t.ok(attempts.length > failing.length - 1, `${attempts.length} attempts in all`);
  t.match(attempts.at(-1), { status_code: 200 });
  t.equal(new Set(attempts.map((a) => a.delivery_id)).size, 1, "one delivery id across processes");
  t.equal(got.headers["x-webhook-id"], attempts[0].delivery_id);
  t.equal(log.filter((e) => e.event === "delivered").length, 1);
});
