import http from "node:http";
import type { AddressInfo } from "node:net";
import t from "tap";
import { startTestServer, type TestServer } from "../support/server.js";
import { Receiver, deliveryEnd, writeWebhookConfig } from "../support/webhooks.js";
import { expectErrors } from "../support/http.js";
import { verifyWebhook } from "../../src/webhooks/signing.js";
import type { Resolver } from "../../src/webhooks/url-policy.js";

/**
 * Webhooks end to end: a real server, real receivers on 127.0.0.1, the official SDK. Private
 * addresses are allowed here (`disable_private_ips: false`) so the receivers can be reached; the
 * policy itself is checked against a second server with the defaults.
 */

const SECRET = "test-secret";
// Response bodies are checked with t.match, field by field.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const json = async (res: Response | Promise<Response>): Promise<any> => (await res).json();
const input = { messages: [{ role: "user", content: "hi" }] };

t.test("webhooks", async (t) => {
  const receiver = await new Receiver().start();
  t.teardown(() => receiver.close());
  process.env.LG_WEBHOOK_TEST_TOKEN = "header-secret";
  const config = await writeWebhookConfig({
    webhooks: {
      headers: { "x-custom": "Bearer ${{ env.LG_WEBHOOK_TEST_TOKEN }}" },
      url: { disable_private_ips: false, disable_loopback: false },
    },
  });
  const server: TestServer = await startTestServer({
    env: { LANGGRAPH_JSON: config, WEBHOOK_SECRET: SECRET, WEBHOOK_RETRY_BASE_MS: "20", WEBHOOK_RETRY_MAX_MS: "100" },
  });
  t.teardown(() => server.close());
  const { client } = server;
  const store = server.server.store;

  t.test("body and headers, signature, ?token= kept byte for byte", async (t) => {
    const thread = await client.threads.create();
    const webhook = `${receiver.url}/hook/a%2Fb?token=s%3Decret&x=1&x=2`;
    const before = receiver.requests.length;
    const run = await client.runs.create(thread.thread_id, "agent", { input, webhook, metadata: { who: "test" } });
    const end = deliveryEnd(store, run.run_id);
    const got = await receiver.nth(before + 1);
    t.equal(got.method, "POST");
    t.equal(got.url, "/hook/a%2Fb?token=s%3Decret&x=1&x=2", "path and query string as given");
    t.equal(got.headers["content-type"], "application/json");
    t.equal(got.headers["x-custom"], "Bearer header-secret", "configured header with its env value");
    t.match(got.headers["x-webhook-id"], /^[0-9a-f-]{36}$/);
    const ts = got.headers["x-webhook-timestamp"] as string;
    t.ok(Math.abs(Number(ts) - Date.now() / 1000) < 60, "timestamp is now");
    t.ok(verifyWebhook(SECRET, ts, got.body, got.headers["x-webhook-signature"] as string), "the signature verifies");
    const body = JSON.parse(got.body);
    t.match(body, {
      run_id: run.run_id,
      thread_id: thread.thread_id,
      assistant_id: run.assistant_id,
      status: "success",
      metadata: { who: "test" },
      multitask_strategy: "enqueue",
      kwargs: { input, webhook, stream_mode: ["values"], config: { configurable: { run_id: run.run_id } } },
      values: { messages: [{ type: "human", content: "hi" }, { type: "ai" }] },
    });
    for (const k of ["created_at", "updated_at", "run_started_at", "run_ended_at", "webhook_sent_at"]) t.type(body[k], "string", k);
    t.notOk("error" in body);
    t.equal((await end).type, "WebhookDelivered");
    const log = await json(fetch(`${server.url}/runs/${run.run_id}/webhooks`));
    t.match(log, [
      { event: "attempt", attempt: 1, status_code: 200, outcome: "delivered", delivery_id: got.headers["x-webhook-id"] },
      { event: "delivered", attempts: 1 },
    ]);
    t.same(await json(fetch(`${server.url}/threads/${thread.thread_id}/runs/${run.run_id}/webhooks`)), log, "thread form of the path");
    t.equal((await fetch(`${server.url}/threads/${crypto.randomUUID()}/runs/${run.run_id}/webhooks`)).status, 404);
  });

  t.test("final values too large for one event are sent as values, not as the log's reference", async (t) => {
    const before = receiver.requests.length;
    const thread = await client.threads.create();
    const big = "large ".repeat(50_000);
    const run = await client.runs.create(thread.thread_id, "agent", {
      input: { messages: [{ role: "user", content: big }] },
      webhook: `${receiver.url}/large`,
    });
    const body = JSON.parse((await receiver.nth(before + 1)).body);
    t.equal(body.run_id, run.run_id);
    t.notOk("__large_json__" in (body.values ?? {}), "no reference");
    t.equal(body.values?.messages?.[0]?.content, big, "the whole input message");
    t.equal(body.values?.messages?.[1]?.type, "ai");
  });

  t.test("a failed run: error {error, message}", async (t) => {
    const before = receiver.requests.length;
    const thread = await client.threads.create();
    const run = await client.runs.create(thread.thread_id, "error", { input, webhook: `${receiver.url}/err` });
    const body = JSON.parse((await receiver.nth(before + 1)).body);
    t.match(body, { run_id: run.run_id, status: "error", error: { error: "CustomError", message: "Boo!" } });
  });

  t.test("5xx, then 429 with Retry-After, then success: one delivery id, several attempts", async (t) => {
    const before = receiver.requests.length;
    receiver.script.push({ status: 503 }, { status: 429, headers: { "retry-after": "0" } });
    const run = await client.runs.create(null, "agent", { input, webhook: `${receiver.url}/flaky` });
    const end = await deliveryEnd(store, run.run_id);
    t.equal(end.type, "WebhookDelivered");
    const got = receiver.requests.slice(before).filter((r) => r.url === "/flaky");
    t.equal(got.length, 3, "three attempts");
    t.equal(new Set(got.map((r) => r.headers["x-webhook-id"])).size, 1, "one delivery id");
    const log = await json(fetch(`${server.url}/runs/${run.run_id}/webhooks`));
    t.match(log, [
      { attempt: 1, status_code: 503, outcome: "retry" },
      { attempt: 2, status_code: 429, outcome: "retry" },
      { attempt: 3, status_code: 200, outcome: "delivered" },
      { event: "delivered", attempts: 3 },
    ]);
    t.ok(log[1].retry_at - Date.parse(log[1].started_at) < 1000, "Retry-After: 0 honoured");
  });

  t.test("a 4xx other than 408/429 is final", async (t) => {
    receiver.script.push({ status: 410 });
    const run = await client.runs.create(null, "agent", { input, webhook: `${receiver.url}/gone` });
    const end = await deliveryEnd(store, run.run_id);
    t.match(end, { type: "WebhookFailed", data: { attempts: 1, reason: "receiver answered 410" } });
  });

  t.test("/metrics counts attempts by outcome, delivery latency and pending deliveries", async (t) => {
    const scrape = async () => {
      const text = await (await fetch(`${server.url}/metrics`)).text();
      const value = (name: string) => Number(text.match(new RegExp(`^${name.replace(/[{}"]/g, "\\$&")} (\\S+)$`, "m"))?.[1] ?? NaN);
      return {
        delivered: value('agent_server_webhook_attempts_total{outcome="delivered"}'),
        retry: value('agent_server_webhook_attempts_total{outcome="retry"}'),
        failed: value('agent_server_webhook_attempts_total{outcome="failed"}'),
        attempts: value("agent_server_webhook_attempt_seconds_count"),
        deliveries: value("agent_server_webhook_delivery_seconds_count"),
        pending: value("agent_server_webhook_pending_deliveries"),
        inFlight: value("agent_server_webhook_attempts_in_flight"),
      };
    };
    const before = await scrape();
    t.ok(Number.isFinite(before.delivered) && Number.isFinite(before.failed), "every outcome is exported");
    receiver.script.push({ status: 500 });
    const ok = await client.runs.create(null, "agent", { input, webhook: `${receiver.url}/metrics-ok` });
    const okEnd = await deliveryEnd(store, ok.run_id);
    receiver.script.push({ status: 404 });
    const gone = await client.runs.create(null, "agent", { input, webhook: `${receiver.url}/metrics-gone` });
    const goneEnd = await deliveryEnd(store, gone.run_id);
    await server.server.readModels.runner.waitFor(goneEnd.position > okEnd.position ? goneEnd.position : okEnd.position);
    const after = await scrape();
    t.same(
      { delivered: after.delivered - before.delivered, retry: after.retry - before.retry, failed: after.failed - before.failed },
      { delivered: 1, retry: 1, failed: 1 },
    );
    t.equal(after.attempts - before.attempts, 3, "each attempt's duration is observed");
    t.equal(after.deliveries - before.deliveries, 1, "delivered ones also observe the latency since the run ended");
    t.equal(after.pending, 0, "nothing due or being sent");
    t.equal(after.inFlight, 0);
  });

  t.test("every endpoint that takes a webhook sends one", async (t) => {
    const thread = await client.threads.create();
    const hook = (name: string) => `${receiver.url}/ep/${name}`;
    const ids: string[] = [];
    const onRunCreated = (m: { run_id: string }) => void ids.push(m.run_id);
    for await (const _ of client.runs.stream(thread.thread_id, "agent", { input, webhook: hook("stream"), onRunCreated })) void _;
    await client.runs.wait(thread.thread_id, "agent", { input, webhook: hook("wait"), onRunCreated });
    for await (const _ of client.runs.stream(null, "agent", { input, webhook: hook("stateless-stream"), onRunCreated })) void _;
    await client.runs.wait(null, "agent", { input, webhook: hook("stateless-wait"), onRunCreated });
    const batch = await json(
      fetch(`${server.url}/runs/batch`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify([{ assistant_id: "agent", input, webhook: hook("batch") }]),
      }),
    );
    ids.push(batch[0].run_id);
    const single = await json(
      fetch(`${server.url}/thread/${thread.thread_id}/runs`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ assistant_id: "agent", input, webhook: hook("singular"), multitask_strategy: "enqueue" }),
      }),
    );
    ids.push(single.run_id);
    t.equal(ids.length, 6);
    const ends = await Promise.all(ids.map((id) => deliveryEnd(store, id)));
    t.same(
      ends.map((e) => e.type),
      Array(6).fill("WebhookDelivered"),
    );
    const urls = new Set(receiver.requests.map((r) => r.url));
    for (const name of ["stream", "wait", "stateless-stream", "stateless-wait", "batch", "singular"]) t.ok(urls.has(`/ep/${name}`), name);
  });

  t.test("30 runs ending together: each webhook is sent once, in one attempt", async (t) => {
    // Two paths can start a delivery (the run's end as it commits, and the read model folding it);
    // the in-flight set must leave exactly one POST per run.
    const threads = await Promise.all(Array.from({ length: 30 }, () => client.threads.create()));
    const runs = await Promise.all(threads.map((th) => client.runs.create(th.thread_id, "agent", { input, webhook: `${receiver.url}/together` })));
    const ends = await Promise.all(runs.map((r) => deliveryEnd(store, r.run_id)));
    t.same(
      ends.map((e) => e.type),
      Array(30).fill("WebhookDelivered"),
    );
    // A later delivery arriving means any stray duplicate of the ones above had its chance to arrive too.
    const last = await client.runs.create(threads[0].thread_id, "agent", { input, webhook: `${receiver.url}/after-together` });
    await deliveryEnd(store, last.run_id);
    const ids = receiver.requests.filter((r) => r.url === "/together").map((r) => JSON.parse(r.body).run_id as string);
    t.equal(ids.length, 30, "30 POSTs");
    t.same(new Set(ids), new Set(runs.map((r) => r.run_id)), "one per run");
    const bodies = receiver.requests.filter((r) => r.url === "/together").map((r) => JSON.parse(r.body));
    t.ok(
      bodies.every((b) => typeof b.run_started_at === "string" && b.status === "success" && b.values?.messages?.length === 2),
      "each body complete",
    );
    for (const r of runs.slice(0, 5)) {
      const log = await json(fetch(`${server.url}/runs/${r.run_id}/webhooks`));
      t.match(
        log,
        [
          { event: "attempt", attempt: 1, status_code: 200 },
          { event: "delivered", attempts: 1 },
        ],
        "one attempt in the delivery log",
      );
      t.equal(log.length, 2);
    }
  });

  t.test("a receiver that never answers holds only its own delivery", async (t) => {
    let arrived!: () => void;
    const hung = new Promise<void>((r) => (arrived = r));
    const silent = http.createServer(() => arrived()); // reads the request, never answers
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
    t.teardown(() => {
      silent.closeAllConnections();
      silent.close();
    });
    const slow = await client.runs.create(null, "agent", { input, webhook: `http://127.0.0.1:${(silent.address() as AddressInfo).port}/slow` });
    await hung;
    const before = receiver.requests.length;
    const thread = await client.threads.create();
    const fast = await client.runs.wait(thread.thread_id, "agent", { input, webhook: `${receiver.url}/fast` });
    t.ok(fast, "runs and the API are not held up");
    await receiver.nth(before + 1);
    t.same(await json(fetch(`${server.url}/runs/${slow.run_id}/webhooks`)), [], "the silent receiver's attempt is still open");
    t.ok(server.server.webhooks!.inFlight >= 1, "its attempt holds one slot");
  });

  t.test("a relative URL goes to this server's own route when loopback is allowed", async (t) => {
    const run = await client.runs.create(null, "agent", { input, webhook: "/runs/crons/count" });
    const end = await deliveryEnd(store, run.run_id);
    t.equal(end.type, "WebhookDelivered");
    const log = await json(fetch(`${server.url}/runs/${run.run_id}/webhooks`));
    t.match(log[0], { status_code: 200 });
  });
});

t.test("URL policy with the defaults: refused at creation (422) and at send time", async (t) => {
  // Names resolve through this table: `private.test` to a private address, `public.test` to a public one.
  const resolver: Resolver = async (host) => {
    const table: Record<string, string> = { "private.test": "10.0.0.8", "meta.test": "169.254.169.254", "public.test": "127.0.0.1" };
    if (!table[host]) throw Object.assign(new Error("not found"), { code: "ENOTFOUND" });
    return [{ address: table[host], family: 4 }];
  };
  const config = await writeWebhookConfig({ webhooks: { url: { allowed_ports: [80, 443, 8443] } } });
  const server = await startTestServer({ env: { LANGGRAPH_JSON: config }, deps: { resolver } });
  t.teardown(() => server.close());
  const thread = await server.client.threads.create();
  const body = (webhook: string) => ({ assistant_id: "agent", input, webhook });
  await expectErrors(t, server.url, [
    ["POST", `/threads/${thread.thread_id}/runs`, body("http://127.0.0.1/x"), 422, /^Webhook host blocked: 127\.0\.0\.1 is a loopback address$/],
    ["POST", "/runs", body("http://10.2.3.4/x"), 422, /^Webhook host blocked: 10\.2\.3\.4 is a private address$/],
    ["POST", "/runs/wait", body("http://169.254.169.254/latest"), 422, /cloud metadata endpoint/],
    ["POST", "/runs/stream", body("http://[fe80::1]/x"), 422, /link-local address/],
    ["POST", "/runs", body("http://localhost/x"), 422, /loopback name/],
    ["POST", "/runs", body("/my-route"), 422, /^Loopback webhooks are disabled$/],
    ["POST", "/runs", body("https://example.com:9999/x"), 422, /^Webhook port 9999 not allowed$/],
    ["POST", "/runs", body("https://example.com/" + "x".repeat(5000)), 422, /^Webhook URL too long$/],
    ["POST", "/runs/batch", [body("http://192.168.1.1/x")], 422, /private address/],
    ["POST", "/runs/crons", { ...body("http://10.0.0.1/x"), schedule: "* * * * *" }, 422, /private address/],
  ]);
  const run = await server.client.runs.create(null, "agent", { input, webhook: "http://private.test/x" });
  const end = await deliveryEnd(server.server.store, run.run_id);
  t.match(end, { type: "WebhookFailed", data: { attempts: 1, reason: "Webhook host blocked: private.test resolves to 10.0.0.8, a private address" } });
  const log = await json(fetch(`${server.url}/runs/${run.run_id}/webhooks`));
  t.match(log, [{ event: "attempt", outcome: "failed", error: /Webhook host blocked/ }, { event: "failed" }], "the refused attempt is logged");
  const meta = await server.client.runs.create(null, "agent", { input, webhook: "http://meta.test/x" });
  t.match(await deliveryEnd(server.server.store, meta.run_id), { type: "WebhookFailed", data: { reason: /cloud metadata endpoint/ } });
  const loop = await server.client.runs.create(null, "agent", { input, webhook: "http://public.test/x" });
  t.match(
    await deliveryEnd(server.server.store, loop.run_id),
    { type: "WebhookFailed", data: { reason: /public\.test resolves to 127\.0\.0\.1, a loopback address/ } },
    "resolved at send time",
  );
});

t.test("http.disable_webhooks: runs with a webhook are accepted, nothing is sent, /info says so", async (t) => {
  const receiver = await new Receiver().start();
  t.teardown(() => receiver.close());
  const config = await writeWebhookConfig({ http: { disable_webhooks: true } });
  const server = await startTestServer({ env: { LANGGRAPH_JSON: config } });
  t.teardown(() => server.close());
  const info = await json(fetch(`${server.url}/info`));
  t.equal(info.flags.webhooks, false);
  t.equal(info.flags.crons, true);
  t.equal(server.server.webhooks, undefined, "no dispatcher runs");
  const thread = await server.client.threads.create();
  const result = await server.client.runs.wait(thread.thread_id, "agent", { input, webhook: `${receiver.url}/never` });
  t.ok(result, "the run ran");
  const [run] = await server.client.runs.list(thread.thread_id);
  t.equal(run.status, "success");
  t.same(await server.server.store.readStream(`webhook-${run.run_id}`), [], "no delivery in the log");
  t.same(await json(fetch(`${server.url}/runs/${run.run_id}/webhooks`)), []);
  t.equal(receiver.requests.length, 0);
});
