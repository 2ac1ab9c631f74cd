import t from "tap";
import Database from "better-sqlite3";
import { WebhookUrlPolicySchema } from "../../src/langgraph-config.js";
import { addressRefusal, checkWebhookUrl, checkWebhookUrlResolved, type Resolver } from "../../src/webhooks/url-policy.js";
import { signWebhook, verifyWebhook } from "../../src/webhooks/signing.js";
import { DEFAULT_RETRY, backoffDelay, classifyAttempt, parseRetryAfter } from "../../src/webhooks/retry.js";
import { webhookBody } from "../../src/webhooks/body.js";
import {
  attemptEvents,
  decideWebhookClaim,
  deliveryIdOf,
  deliveryOf,
  deliveryRunEnded,
  evolveDelivery,
  type Delivery,
  type WebhookEvent,
} from "../../src/domain/webhooks.js";
import { webhooksTable, WebhooksReadModel } from "../../src/read-models/webhooks.js";
import type { RunRecord } from "../../src/domain/run-record.js";
import type { RecordedEvent } from "../../src/eventstore/types.js";
import { schemaForEventType } from "../../src/domain/events.js";

/** The pure parts of webhook delivery: URL policy, signature, retries, body, deciders, fold. */

const policy = (over: Record<string, unknown> = {}) => WebhookUrlPolicySchema.parse(over);
const resolverOf =
  (map: Record<string, string[]>): Resolver =>
  async (host) => {
    const found = map[host];
    if (!found) throw Object.assign(new Error("not found"), { code: "ENOTFOUND" });
    return found.map((address) => ({ address, family: address.includes(":") ? 6 : 4 }));
  };

t.test("URL policy at creation: every rule with the official message", async (t) => {
  const def = policy();
  t.same(checkWebhookUrl("https://hooks.example.com/x?token=abc", def), { ok: true, relative: false });
  const refused: [string, Record<string, unknown>, RegExp][] = [
    ["https://example.com/" + "a".repeat(5000), {}, /^Webhook URL too long$/],
    ["/my-route", {}, /^Loopback webhooks are disabled$/],
    ["http://example.com/x", { require_https: true }, /^Webhook must use https$/],
    ["https://example.com:8443/x", { allowed_ports: [443] }, /^Webhook port 8443 not allowed$/],
    ["https://evil.com/x", { allowed_domains: ["*.example.com", "example.org"] }, /^Webhook domain not allowed$/],
    ["http://127.0.0.1:9/x", {}, /^Webhook host blocked: 127\.0\.0\.1 is a loopback address$/],
    ["http://[::1]:9/x", {}, /^Webhook host blocked: ::1 is a loopback address$/],
    ["http://10.1.2.3/x", {}, /^Webhook host blocked: 10\.1\.2\.3 is a private address$/],
    ["http://192.168.0.10/x", {}, /private address/],
    ["http://172.16.5.4/x", {}, /private address/],
    ["http://169.254.10.10/x", {}, /link-local address/],
    ["http://169.254.169.254/latest/meta-data", { disable_private_ips: false }, /cloud metadata endpoint/],
    ["http://metadata.google.internal/x", { disable_private_ips: false }, /cloud metadata endpoint/],
    ["http://[fd00:ec2::254]/x", { disable_private_ips: false }, /cloud metadata endpoint/],
    ["http://[::ffff:10.0.0.1]/x", {}, /10\.0\.0\.1 is a private address/],
    ["http://0.0.0.0/x", {}, /unspecified address/],
    ["http://localhost:8080/x", {}, /localhost is a loopback name/],
    ["ftp://example.com/x", {}, /scheme ftp/],
    ["not a url", {}, /Invalid webhook URL/],
  ];
  for (const [url, over, detail] of refused) {
    const r = checkWebhookUrl(url, policy(over));
    t.notOk(r.ok, url.slice(0, 60));
    if (!r.ok) t.match(r.detail, detail);
  }
  t.ok(checkWebhookUrl("https://a.example.com/x", policy({ allowed_domains: ["*.example.com"] })).ok, "wildcard domain");
  t.ok(checkWebhookUrl("https://example.org/x", policy({ allowed_domains: ["*.example.com", "example.org"] })).ok, "exact domain");
  t.ok(checkWebhookUrl("http://127.0.0.1:9/x", policy({ disable_private_ips: false })).ok, "private addresses allowed for local development");
  t.same(checkWebhookUrl("/my-route", policy({ disable_loopback: false })), { ok: true, relative: true });
});

t.test("URL policy at send time: a name resolving to a private address is refused", async (t) => {
  const resolver = resolverOf({ "public.test": ["93.184.216.34"], "sneaky.test": ["93.184.216.34", "10.0.0.7"], "meta.test": ["169.254.169.254"] });
  t.same(await checkWebhookUrlResolved("https://public.test/x", policy(), resolver), { ok: true, relative: false });
  t.match(await checkWebhookUrlResolved("https://sneaky.test/x", policy(), resolver), {
    ok: false,
    detail: /^Webhook host blocked: sneaky\.test resolves to 10\.0\.0\.7, a private address$/,
  });
  t.match(await checkWebhookUrlResolved("https://meta.test/x", policy({ disable_private_ips: false }), resolver), { ok: false, detail: /cloud metadata/ });
  t.match(await checkWebhookUrlResolved("https://gone.test/x", policy(), resolver), { ok: false, detail: /does not resolve \(ENOTFOUND\)/ });
  t.same(await checkWebhookUrlResolved("https://sneaky.test/x", policy({ disable_private_ips: false }), resolver), { ok: true, relative: false });
  t.equal(addressRefusal("8.8.8.8", policy()), undefined);
});

t.test("signature: HMAC-SHA256 over timestamp.body, verified in constant time", async (t) => {
  const sig = signWebhook("s3cret", "1700000000", '{"a":1}');
  t.match(sig, /^v1=[0-9a-f]{64}$/);
  t.ok(verifyWebhook("s3cret", "1700000000", '{"a":1}', sig));
  t.notOk(verifyWebhook("s3cret", "1700000001", '{"a":1}', sig), "another timestamp");
  t.notOk(verifyWebhook("s3cret", "1700000000", '{"a":2}', sig), "another body");
  t.notOk(verifyWebhook("other", "1700000000", '{"a":1}', sig), "another secret");
});

t.test("retries: exponential backoff with jitter, Retry-After, final answers", async (t) => {
  t.equal(
    backoffDelay(1, DEFAULT_RETRY, () => 0.5),
    5_000,
  );
  t.equal(
    backoffDelay(3, DEFAULT_RETRY, () => 0.5),
    20_000,
  );
  t.equal(
    backoffDelay(20, DEFAULT_RETRY, () => 0.5),
    300_000,
    "ceiling",
  );
  t.equal(
    backoffDelay(1, DEFAULT_RETRY, () => 0),
    4_000,
    "jitter -20 %",
  );
  t.equal(
    backoffDelay(1, DEFAULT_RETRY, () => 1),
    6_000,
    "jitter +20 %",
  );
  let total = 0;
  for (let a = 1; a < DEFAULT_RETRY.maxAttempts; a++) total += backoffDelay(a, DEFAULT_RETRY, () => 0.5);
  t.ok(total > 8 * 60_000 && total < 12 * 60_000, `8 attempts span about 10 minutes (${total / 60_000} min)`);

  t.equal(parseRetryAfter("7", 0), 7_000);
  t.equal(parseRetryAfter(new Date(60_000).toUTCString(), 0), 60_000);
  t.equal(parseRetryAfter("soon", 0), undefined);

  const now = 1_000_000;
  t.same(classifyAttempt({ statusCode: 204 }, 1, DEFAULT_RETRY, now), { outcome: "delivered" });
  t.match(classifyAttempt({ statusCode: 404 }, 1, DEFAULT_RETRY, now), { outcome: "failed", reason: "receiver answered 404" });
  t.match(
    classifyAttempt({ statusCode: 503 }, 1, DEFAULT_RETRY, now, () => 0.5),
    { outcome: "retry", retryAt: now + 5_000 },
  );
  t.match(classifyAttempt({ statusCode: 408 }, 1, DEFAULT_RETRY, now), { outcome: "retry" });
  t.match(classifyAttempt({ statusCode: 429, retryAfter: "42" }, 1, DEFAULT_RETRY, now), { outcome: "retry", retryAt: now + 42_000 });
  t.match(classifyAttempt({ error: "ECONNREFUSED" }, 2, DEFAULT_RETRY, now), { outcome: "retry" });
  t.match(classifyAttempt({ error: "Webhook host blocked: x", final: true }, 1, DEFAULT_RETRY, now), { outcome: "failed", reason: "Webhook host blocked: x" });
  t.match(classifyAttempt({ statusCode: 500 }, 8, DEFAULT_RETRY, now), { outcome: "failed", reason: /gave up after 8 attempts \(last: HTTP 500\)/ });
});

const NOW = "2026-01-01T00:00:00+00:00";
const run: RunRecord = {
  run_id: "0190aaaa-0000-7000-8000-000000000001",
  thread_id: "t1",
  assistant_id: "a1",
  created_at: NOW,
  updated_at: NOW,
  status: "pending",
  metadata: { m: 1 },
  multitask_strategy: "enqueue",
  kwargs: {
    input: { q: 1 },
    config: {},
    context: {},
    stream_mode: ["values"],
    webhook: "https://h.example.com/x?token=t",
    temporary: false,
    subgraphs: false,
    resumable: false,
  },
};

t.test("body: the run, times, values, error; allowed_fields filter", async (t) => {
  const d: Delivery = {
    ...deliveryRunEnded(deliveryOf(run)!, { status: "error", error: { error: "CustomError", message: "Boo!" }, ended_at: "2026-01-01T00:00:05+00:00" }),
    run_started_at: "2026-01-01T00:00:01+00:00",
  };
  const body = webhookBody(d, "2026-01-01T00:00:06+00:00");
  t.match(body, {
    run_id: run.run_id,
    thread_id: "t1",
    assistant_id: "a1",
    status: "error",
    metadata: { m: 1 },
    multitask_strategy: "enqueue",
    kwargs: { input: { q: 1 }, webhook: "https://h.example.com/x?token=t" },
    created_at: NOW,
    updated_at: "2026-01-01T00:00:05+00:00",
    run_started_at: "2026-01-01T00:00:01+00:00",
    run_ended_at: "2026-01-01T00:00:05+00:00",
    webhook_sent_at: "2026-01-01T00:00:06+00:00",
    values: null,
    error: { error: "CustomError", message: "Boo!" },
  });
  t.same(Object.keys(webhookBody(d, NOW, ["run_id", "status"])).sort(), ["run_id", "status"]);
});

t.test("deliveries: claim once, retry when due, lapse of a dead sender's lease, final outcomes", async (t) => {
  t.equal(deliveryOf({ ...run, kwargs: { ...run.kwargs, webhook: undefined } }), undefined, "no webhook, no delivery");
  let d = deliveryOf(run)!;
  t.match(decideWebhookClaim(d, { owner: "a", now: NOW, nowMs: 0, leaseMs: 100 }), { ok: false, kind: "conflict", detail: "run has not ended" });
  d = deliveryRunEnded(d, { status: "success", values: { x: 1 }, ended_at: "1970-01-01T00:00:01.000Z" });
  t.equal(d.status, "due");
  t.equal(d.due_at, 1000);
  const claim = decideWebhookClaim(d, { owner: "a", now: NOW, nowMs: 1000, leaseMs: 100 });
  t.match(claim, {
    ok: true,
    attempt: 1,
    events: [{ type: "WebhookClaimed", data: { owner: "a", attempt: 1, delivery_id: deliveryIdOf(run.run_id), lease_expires_at: 1100 } }],
  });
  if (!claim.ok) return;
  t.ok(schemaForEventType("WebhookClaimed")!.safeParse(claim.events[0].data).success, "the claim matches its schema");
  d = evolveDelivery(d, claim.events[0] as WebhookEvent, 0n);
  t.match(decideWebhookClaim(d, { owner: "b", now: NOW, nowMs: 1050, leaseMs: 100 }), { ok: false, kind: "conflict", detail: "delivery claimed" });
  t.match(decideWebhookClaim(d, { owner: "b", now: NOW, nowMs: 1100, leaseMs: 100 }), { ok: true, attempt: 1 }, "a lapsed lease is taken over");
  t.match(decideWebhookClaim(d, { owner: "b", now: NOW, nowMs: 1050, leaseMs: 100, takeover: true }), { ok: true }, "takeover of a dead owner at start");
  const retry = attemptEvents(
    { owner: "a", attempt: 1, delivery_id: "x", started_at: NOW, duration_ms: 3, status_code: 503, outcome: "retry", retry_at: 5000 },
    NOW,
  );
  t.equal(retry.length, 1);
  d = evolveDelivery(d, retry[0] as WebhookEvent, 1n);
  t.match(d, { status: "due", due_at: 5000, attempts: 1 });
  t.match(decideWebhookClaim(d, { owner: "a", now: NOW, nowMs: 4999, leaseMs: 100 }), { ok: false, kind: "conflict", detail: "not due yet" });
  t.match(decideWebhookClaim(d, { owner: "a", now: NOW, nowMs: 5000, leaseMs: 100 }), { ok: true, attempt: 2 });
  const done = attemptEvents({ owner: "a", attempt: 2, delivery_id: "x", started_at: NOW, duration_ms: 3, status_code: 200, outcome: "delivered" }, NOW);
  t.same(
    done.map((e) => e.type),
    ["WebhookAttempted", "WebhookDelivered"],
  );
  d = done.reduce((s, e, i) => evolveDelivery(s, e as WebhookEvent, BigInt(2 + i)), d);
  t.match(d, { status: "delivered", due_at: null, attempts: 2, revision: 3n });
  t.match(decideWebhookClaim(d, { owner: "a", now: NOW, nowMs: 9e9, leaseMs: 100 }), { ok: false, kind: "conflict", detail: "delivery already delivered" });
  const failed = attemptEvents(
    { owner: "a", attempt: 1, delivery_id: "x", started_at: NOW, duration_ms: 1, error: "Webhook host blocked: y", outcome: "failed" },
    NOW,
    "Webhook host blocked: y",
  );
  t.match(failed[1], { type: "WebhookFailed", data: { reason: "Webhook host blocked: y", attempts: 1 } });
});

t.test("webhooks table: rows from run and webhook events, due index, JSON round trip", async (t) => {
  const db = new Database(":memory:");
  for (const ddl of webhooksTable.ddl) db.exec(ddl);
  const apply = webhooksTable.prepare(db) as (event: RecordedEvent) => void;
  const model = new WebhooksReadModel(db);
  let position = 0n;
  const ev = (streamId: string, type: string, data: unknown, revision = 0n): RecordedEvent => ({
    streamId,
    id: String(position),
    type,
    revision,
    position: position++,
    data,
    metadata: {},
    created: new Date(0),
  });
  apply(ev("thread-t1", "RunEnqueued", { run: { ...run, kwargs: { ...run.kwargs, webhook: undefined } }, thread_metadata: {} }));
  apply(ev("thread-t1", "RunEnqueued", { run, thread_metadata: {} }));
  t.equal(db.prepare("SELECT count(*) FROM webhook_deliveries").pluck().get(), 1, "only runs with a webhook");
  apply(ev(`run-${run.run_id}`, "RunClaimed", { owner: "w", attempt: 1, claimed_at: "1970-01-01T00:00:00.500Z", lease_expires_at: 1 }));
  t.same(model.due(1e12, 10), [], "not due while the run runs");
  t.equal(model.nextDue(), undefined);
  apply(ev(`run-${run.run_id}`, "RunEnded", { status: "success", values: { a: 1 }, ended_at: "1970-01-01T00:00:02.000Z" }, 1n));
  t.equal(model.nextDue(), 2000);
  t.same(model.due(1999, 10), []);
  const [due] = model.due(2000, 10);
  t.match(due, { run_id: run.run_id, status: "due", run_started_at: "1970-01-01T00:00:00.500Z", revision: "no_stream", ended: { values: { a: 1 } } });
  apply(ev(`webhook-${run.run_id}`, "WebhookClaimed", { owner: "a", attempt: 1, delivery_id: "x", claimed_at: NOW, lease_expires_at: 9000 }, 0n));
  t.match(model.get(run.run_id), { status: "sending", due_at: 9000, revision: 0n });
  t.equal(model.sending().length, 1);
  apply(
    ev(
      `webhook-${run.run_id}`,
      "WebhookAttempted",
      { owner: "a", attempt: 1, delivery_id: "x", started_at: NOW, duration_ms: 1, status_code: 200, outcome: "delivered" },
      1n,
    ),
  );
  apply(ev(`webhook-${run.run_id}`, "WebhookDelivered", { attempts: 1, delivered_at: NOW }, 2n));
  t.match(model.get(run.run_id), { status: "delivered", due_at: null, revision: 2n });
  t.equal(model.nextDue(), undefined);
  apply(ev("thread-t1", "ThreadDeleted", { deleted_at: NOW }, 3n));
  t.ok(model.get(run.run_id), "a delivery outlives its (temporary) thread");
  db.close();
});
