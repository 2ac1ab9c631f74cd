import t from "tap";
import { startTestServer } from "../support/server.js";
import { Receiver, deliveryEnd } from "../support/webhooks.js";
import { expectErrors } from "../support/http.js";

/**
 * Development mode (LANGGRAPH_DEV=true, as `langgraph dev`): webhooks may reach loopback and
 * private addresses, so a receiver on 127.0.0.1 gets its POST through the real sender thread.
 * Without it, the same langgraph.json (the test graphs, no `webhooks` section) refuses them.
 */

const input = { messages: [{ role: "user", content: "hi" }] };

t.test("a webhook to 127.0.0.1: refused by default, delivered with LANGGRAPH_DEV=true", async (t) => {
  const receiver = await new Receiver().start();
  t.teardown(() => receiver.close());

  const strict = await startTestServer();
  t.teardown(() => strict.close());
  await expectErrors(t, strict.url, [
    ["POST", "/runs", { assistant_id: "agent", input, webhook: `${receiver.url}/hook` }, 422, /^Webhook host blocked: 127\.0\.0\.1 is a loopback address$/],
    ["POST", "/runs", { assistant_id: "agent", input, webhook: "http://10.1.2.3/hook" }, 422, /^Webhook host blocked: 10\.1\.2\.3 is a private address$/],
  ]);

  const dev = await startTestServer({ env: { LANGGRAPH_DEV: "true" } });
  t.teardown(() => dev.close());
  const thread = await dev.client.threads.create();
  const run = await dev.client.runs.create(thread.thread_id, "agent", { input, webhook: `${receiver.url}/hook?dev=1` });
  const got = await receiver.nth(1);
  t.equal(got.url, "/hook?dev=1");
  t.match(JSON.parse(got.body), { run_id: run.run_id, thread_id: thread.thread_id, status: "success" });
  t.equal((await deliveryEnd(dev.server.store, run.run_id)).type, "WebhookDelivered");
  t.equal(receiver.requests.length, 1, "the strict server sent nothing");

  await expectErrors(t, dev.url, [
    ["POST", "/runs", { assistant_id: "agent", input, webhook: "http://169.254.169.254/latest" }, 422, /cloud metadata endpoint/],
  ]);
  // A relative URL is this server itself (loopback): allowed in development mode, as the official
  // JS dev server's own suite sends `/custom/webhook`; the strict server refuses it (above).
  const relative = await fetch(`${dev.url}/runs`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ assistant_id: "agent", input, webhook: "/my-route" }),
  });
  t.equal(relative.status, 200, "a relative webhook is accepted in development mode");
  const cron = await fetch(`${dev.url}/runs/crons`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ assistant_id: "agent", input, schedule: "0 0 1 1 *", webhook: "http://192.168.1.20/hook" }),
  });
  t.equal(cron.status, 200, "a cron's private webhook is accepted in development mode too");
});
