import t from "tap";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { startTestServer, repoRoot } from "../support/server.js";
import { expectErrors } from "../support/http.js";

/** Auditors through the HTTP API: attribution, /events, /replay, purge, TTL, /metrics, /info. */

const human = (content: string) => ({ role: "user", content });
type AuditEvent = {
  position: string;
  stream: string;
  revision: string;
  type: string;
  time: string;
  metadata: Record<string, unknown>;
  data: Record<string, unknown>;
};

async function getJson<T>(url: string, headers: Record<string, string> = {}): Promise<{ status: number; body: T; headers: Headers }> {
  const res = await fetch(url, { headers });
  return { status: res.status, body: (await res.json()) as T, headers: res.headers };
}

t.test("attribution, history, replay and purge", async (t) => {
  const srv = await startTestServer();
  t.teardown(() => srv.close());
  const { client, url } = srv;

  t.test("X-Request-Id is kept or generated, echoed, and on the events the request appended", async (t) => {
    const res = await fetch(`${url}/threads`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-request-id": "req-audit-1" },
      body: JSON.stringify({ metadata: { case: "attr" } }),
    });
    t.equal(res.headers.get("x-request-id"), "req-audit-1");
    const thread = (await res.json()) as { thread_id: string };
    const generated = await fetch(`${url}/ok`);
    t.match(generated.headers.get("x-request-id"), /^[0-9a-f-]{36}$/);
    const bad = await fetch(`${url}/nowhere`, { headers: { "x-request-id": "bad id with spaces" } });
    t.equal(bad.status, 404);
    t.match(bad.headers.get("x-request-id"), /^[0-9a-f-]{36}$/, "a malformed id is replaced");

    const { body: events } = await getJson<AuditEvent[]>(`${url}/threads/${thread.thread_id}/events`);
    t.equal(events.length, 1);
    t.match(events[0], { type: "ThreadCreated", stream: `thread-${thread.thread_id}`, revision: "0" });
    t.same(events[0].metadata, { actor: "anonymous", request_id: "req-audit-1", causation_id: "req-audit-1", correlation_id: thread.thread_id });
  });

  t.test("a run: request events carry the request, worker events the worker and the run", async (t) => {
    const thread = await client.threads.create({ metadata: { case: "run" } });
    await client.runs.wait(thread.thread_id, "agent", { input: { messages: [human("hi")] } });
    const [run] = await client.runs.list(thread.thread_id);
    const { body: events } = await getJson<AuditEvent[]>(`${url}/threads/${thread.thread_id}/events?limit=1000`);
    const enqueued = events.find((e) => e.type === "RunEnqueued")!;
    t.equal(enqueued.metadata.actor, "anonymous");
    t.equal(enqueued.metadata.correlation_id, run.run_id, "a thread event of a run is correlated with the run");
    const requestId = enqueued.metadata.request_id as string;
    t.ok(requestId);
    const claimed = events.find((e) => e.type === "RunClaimed")!;
    t.match(claimed.metadata.actor, /^worker:/);
    t.equal(claimed.metadata.correlation_id, run.run_id);
    t.equal(claimed.metadata.causation_id, requestId, "the worker's events name the request that enqueued the run");
    t.notOk(claimed.metadata.request_id);
    const checkpoint = events.find((e) => e.stream.startsWith("checkpoints-"))!;
    t.match(checkpoint.metadata, { actor: /^worker:/, correlation_id: run.run_id });
    t.notOk(
      events.some((e) => e.type === "RunOutput"),
      "output chunks are left out by default",
    );
    const positions = events.map((e) => BigInt(e.position));
    t.same(
      positions,
      [...positions].sort((a, b) => (a < b ? -1 : 1)),
      "log order",
    );

    const withOutput = await getJson<AuditEvent[]>(`${url}/threads/${thread.thread_id}/events?include_output=true&limit=1000`);
    t.ok(withOutput.body.some((e) => e.type === "RunOutput"));
    const onlyRun = await getJson<AuditEvent[]>(`${url}/threads/${thread.thread_id}/events?run_id=${run.run_id}&limit=1000`);
    t.ok(onlyRun.body.length > 0 && onlyRun.body.every((e) => e.type !== "ThreadCreated"));
    const typed = await getJson<AuditEvent[]>(`${url}/threads/${thread.thread_id}/events?types=ThreadCreated,RunEnded`);
    t.same(
      typed.body.map((e) => e.type),
      ["ThreadCreated", "RunEnded"],
    );
    const page1 = await getJson<AuditEvent[]>(`${url}/threads/${thread.thread_id}/events?limit=2`);
    const page2 = await getJson<AuditEvent[]>(`${url}/threads/${thread.thread_id}/events?limit=2&after=${page1.body[1].position}`);
    t.same(
      [...page1.body, ...page2.body].map((e) => e.position),
      events.slice(0, 4).map((e) => e.position),
      "after + limit page through",
    );

    const ndjson = await fetch(`${url}/threads/${thread.thread_id}/events`, { headers: { accept: "application/x-ndjson" } });
    t.match(ndjson.headers.get("content-type"), /application\/x-ndjson/);
    const lines = (await ndjson.text())
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as AuditEvent);
    t.same(
      lines.map((e) => e.position),
      events.map((e) => e.position),
      "the whole history as NDJSON",
    );

    // Replay: at the enqueue the run is pending and the thread busy; now it is idle with the answer.
    const atEnqueue = await getJson<{ thread: { status: string }; runs: { status: string }[] }>(
      `${url}/threads/${thread.thread_id}/replay?at=${enqueued.position}`,
    );
    t.equal(atEnqueue.body.thread.status, "busy");
    t.same(
      atEnqueue.body.runs.map((r) => r.status),
      ["pending"],
    );
    const now = await getJson<{ thread: { status: string; values: { messages: { content: string }[] } }; runs: { status: string }[] }>(
      `${url}/threads/${thread.thread_id}/replay`,
    );
    t.equal(now.body.thread.status, "idle");
    t.same(
      now.body.thread.values.messages.map((m) => m.content),
      ["hi", "You said: hi"],
    );
    t.same(
      now.body.runs.map((r) => r.status),
      ["success"],
    );
    const byTime = await getJson<{ thread: { status: string } }>(
      `${url}/threads/${thread.thread_id}/replay?at=${encodeURIComponent(new Date().toISOString())}`,
    );
    t.equal(byTime.body.thread.status, "idle");
    const diffed = await getJson<{ diff: { changes: { path: unknown[] }[] } }>(`${url}/threads/${thread.thread_id}/replay?diff=${enqueued.position}`);
    t.ok(
      diffed.body.diff.changes.some((c) => c.path[0] === "thread" && c.path[1] === "status"),
      "the diff names the status change",
    );
  });

  t.test("configurable: only what http.configurable_headers lets through (nothing by default)", async (t) => {
    const thread = await client.threads.create();
    const res = await fetch(`${url}/threads/${thread.thread_id}/runs/wait`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "x-secret-token": "s3cret",
        "user-agent": "ua/1",
        authorization: "Bearer x",
        "x-request-id": "req-cfg",
        "langsmith-trace": "trace-1",
      },
      body: JSON.stringify({ assistant_id: "agent", input: { messages: [human("x")] } }),
    });
    t.equal(res.status, 200);
    const [run] = await client.runs.list(thread.thread_id);
    const configurable = (run as unknown as { kwargs: { config: { configurable: Record<string, unknown> } } }).kwargs.config.configurable;
    t.notOk("x-secret-token" in configurable);
    t.notOk("user-agent" in configurable);
    t.notOk("authorization" in configurable);
    t.equal(configurable["langsmith-trace"], "trace-1");
    t.equal(configurable.langgraph_request_id, "req-cfg");
    const { body: events } = await getJson<AuditEvent[]>(`${url}/threads/${thread.thread_id}/events?limit=1000`);
    t.notOk(JSON.stringify(events).includes("s3cret"), "the secret header is nowhere in the log");
  });

  t.test("deleted threads stay readable; a purge leaves tombstones and ThreadPurged", async (t) => {
    const thread = await client.threads.create({ metadata: { case: "purge" } });
    await client.runs.wait(thread.thread_id, "agent", { input: { messages: [human("secret words")] } });
    await client.threads.delete(thread.thread_id);
    const deleted = await getJson<AuditEvent[]>(`${url}/threads/${thread.thread_id}/events?limit=1000`);
    t.equal(deleted.status, 200);
    t.ok(JSON.stringify(deleted.body).includes("secret words"), "a logical delete keeps the history");
    t.ok(deleted.body.some((e) => e.type === "ThreadDeleted"));

    const purge = await fetch(`${url}/threads/${thread.thread_id}?purge=true`, { method: "DELETE", headers: { "x-request-id": "req-purge" } });
    t.equal(purge.status, 204);
    const after = await getJson<AuditEvent[]>(`${url}/threads/${thread.thread_id}/events?limit=1000&include_output=true`);
    t.notOk(JSON.stringify(after.body).includes("secret words"), "the content left the log");
    const last = after.body[after.body.length - 1];
    t.match(last, { type: "ThreadPurged", data: { thread_id: thread.thread_id, purged_by: "anonymous" }, metadata: { request_id: "req-purge" } });
    t.ok(
      after.body.slice(0, -1).every((e) => e.type === "EventPurged"),
      "every earlier event is a tombstone",
    );
    t.ok(
      after.body.some((e) => e.stream.startsWith("run-")),
      "run streams are purged too",
    );
    const tombstones = after.body.slice(0, -1);
    t.same(
      tombstones.filter((e) => !e.stream.startsWith("run-")).map((e) => e.position),
      deleted.body.filter((e) => !e.stream.startsWith("run-")).map((e) => e.position),
      "tombstones keep their places",
    );
    const replay = await getJson<{ thread: { status: string; purged: boolean; values: unknown } }>(`${url}/threads/${thread.thread_id}/replay`);
    t.match(replay.body.thread, { status: "deleted", purged: true, values: null });
    t.equal((await fetch(`${url}/threads/${thread.thread_id}?purge=true`, { method: "DELETE" })).status, 404, "purged once only");
    // A live thread is deleted and purged in one go.
    const live = await client.threads.create();
    t.equal((await fetch(`${url}/threads/${live.thread_id}?purge=true`, { method: "DELETE" })).status, 204);
    t.equal((await fetch(`${url}/threads/${live.thread_id}`)).status, 404);
  });

  t.test("bad input", async (t) => {
    const unknown = "00000000-0000-4000-8000-000000000000";
    const thread = await client.threads.create();
    await expectErrors(t, url, [
      ["GET", `/threads/${unknown}/events`, undefined, 404, /not found/],
      ["GET", `/threads/${unknown}/replay`, undefined, 404, /not found/],
      ["DELETE", `/threads/${unknown}?purge=true`, undefined, 404, /not found/],
      ["GET", `/threads/not-a-uuid/events`, undefined, 422, /thread_id/],
      ["GET", `/threads/${thread.thread_id}/events?after=-1`, undefined, 422, /after/],
      ["GET", `/threads/${thread.thread_id}/events?limit=0`, undefined, 422, /limit/],
      ["GET", `/threads/${thread.thread_id}/events?include_output=maybe`, undefined, 422, /include_output/],
      ["GET", `/threads/${thread.thread_id}/replay?at=yesterday`, undefined, 422, /^at: /],
      ["GET", `/threads/${thread.thread_id}/replay?at=12abc`, undefined, 422, /^at: /],
      ["GET", `/threads/${thread.thread_id}/replay?diff=2024-13-45T00:00:00Z`, undefined, 422, /^diff: /],
      ["POST", `/threads`, { ttl: { ttl: 5, strategy: "keep_latest" } }, 422, /ttl/],
    ]);
  });

  t.test("/metrics and /info", async (t) => {
    const metrics = await (await fetch(`${url}/metrics`)).text();
    t.match(metrics, /agent_server_runs\{status="success"\} \d+/);
    t.match(metrics, /agent_server_pending_runs \d+/);
    t.match(metrics, /agent_server_sse_streams_open 0/);
    t.match(metrics, /agent_server_append_seconds_count \d+/);
    t.match(metrics, /agent_server_projection_lag_events \d+/);
    // Start-up phases, in the order they ran, each a non-negative duration.
    const phases = [...metrics.matchAll(/^agent_server_startup_phase_seconds\{phase="([^"]+)"\} (\S+)$/gm)];
    t.same(
      phases.map((m) => m[1]),
      ["modules", "configuration", "event store", "read models", "default assistants", "http routes", "listening", "schedulers", "graph runtime", "run worker"],
    );
    t.ok(
      phases.every((m) => Number(m[2]) >= 0),
      "each phase took a non-negative time",
    );

    /** One sample's value (NaN when the line is missing, so a missing metric fails every check). */
    const scrape = async () => {
      const text = await (await fetch(`${url}/metrics`)).text();
      const value = (sample: string) => Number(text.match(new RegExp(`^${sample.replace(/[{}"]/g, "\\$&")} (\\S+)$`, "m"))?.[1] ?? NaN);
      return {
        success: value('agent_server_runs{status="success"}'),
        error: value('agent_server_runs{status="error"}'),
        running: value('agent_server_runs{status="running"}'),
        pendingByStatus: value('agent_server_runs{status="pending"}'),
        interrupted: value('agent_server_runs{status="interrupted"}'),
        pending: value("agent_server_pending_runs"),
        appends: value("agent_server_append_seconds_count"),
        appendFailures: value("agent_server_append_failures_total"),
        syncs: value("agent_server_wal_syncs_total"),
        syncSeconds: value("agent_server_wal_sync_seconds_total"),
        foldBatches: value("agent_server_projection_batches_total"),
        foldEvents: value("agent_server_projection_events_total"),
        foldSeconds: value("agent_server_projection_batch_seconds_total"),
      };
    };
    const zero = (n: number) => (Number.isNaN(n) ? 0 : n); // a status with no run has no sample
    const before = await scrape();
    t.ok(Number.isFinite(before.appendFailures) && Number.isFinite(before.appends), "append counters are exported");

    // One run that succeeds, one that fails: the gauges move by exactly one each.
    const ok = await client.threads.create();
    const good = await client.runs.create(ok.thread_id, "agent", { input: { messages: [human("count me")] } });
    await client.runs.join(ok.thread_id, good.run_id);
    const bad = await client.runs.create(ok.thread_id, "error", { input: { messages: [human("fail me")] } });
    await client.runs.join(ok.thread_id, bad.run_id);
    const ended = await scrape();
    t.equal(ended.success - before.success, 1, "one more successful run");
    t.equal(zero(ended.error) - zero(before.error), 1, "one more failed run");
    t.equal(ended.pending, before.pending, "nothing left pending");
    t.ok(ended.appends > before.appends, "the runs' appends were timed");
    t.equal(ended.appendFailures, before.appendFailures, "no append was refused");
    // The embedded log (synchronous FULL) synced its WAL for the runs, and the read models folded their events.
    t.ok(ended.syncs > before.syncs, "WAL syncs are counted");
    t.ok(ended.syncSeconds > before.syncSeconds, "and timed");
    t.ok(ended.foldBatches > before.foldBatches, "fold batches are counted");
    t.ok(ended.foldEvents - before.foldEvents >= ended.foldBatches - before.foldBatches, "each batch folded at least one event");
    t.ok(ended.foldSeconds > before.foldSeconds, "fold transactions are timed");

    // An append the log refuses (a stream that exists, appended as if new) is counted once.
    const [created] = await srv.server.store.readStream(`thread-${ok.thread_id}`, { maxCount: 1 });
    await t.rejects(srv.server.store.append(`thread-${ok.thread_id}`, [{ type: created.type, data: created.data }], "no_stream"), {
      name: "WrongExpectedVersionError",
    });
    t.equal((await scrape()).appendFailures - ended.appendFailures, 1, "append_failures_total: exactly one more");

    // A running run and one queued behind it: running +1, pending +1; both gone once cancelled.
    const busy = await client.threads.create();
    const slow = await client.runs.create(busy.thread_id, "delay", { input: { messages: [human("slow")], delay: 60_000 } });
    const queued = await client.runs.create(busy.thread_id, "delay", { input: { messages: [human("queued")] }, multitaskStrategy: "enqueue" });
    const deadline = Date.now() + 10_000;
    while ((await client.runs.get(busy.thread_id, slow.run_id)).status !== "running" && Date.now() < deadline) await new Promise((r) => setImmediate(r));
    const busyNow = await scrape();
    t.equal(zero(busyNow.running) - zero(ended.running), 1, "one run running");
    t.equal(busyNow.pending - ended.pending, 1, "one run waiting (queue depth)");
    t.equal(zero(busyNow.pendingByStatus) - zero(ended.pendingByStatus), 1, "the same run by status");
    await client.runs.cancel(busy.thread_id, queued.run_id);
    await client.runs.cancel(busy.thread_id, slow.run_id, true);
    await client.runs.join(busy.thread_id, queued.run_id);
    const calm = await scrape();
    t.equal(zero(calm.running), zero(ended.running), "no run running");
    t.equal(calm.pending, ended.pending, "queue drained");
    t.equal(zero(calm.interrupted) - zero(ended.interrupted), 2, "both cancelled runs are interrupted");
    const info = await getJson<{ store: { kind: string; head_position: string }; projections: { name: string; position: string }[] }>(`${url}/info`);
    t.equal(info.body.store.kind, "sqlite");
    t.ok(BigInt(info.body.store.head_position) > 0n);
    const names = info.body.projections.map((p) => p.name);
    for (const name of ["assistants", "runs", "threads"]) t.ok(names.includes(name), `projection ${name} listed`);
  });
});

t.test("configurable_headers includes and excludes from langgraph.json", async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), "audit-cfg-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const config = path.join(dir, "langgraph.json");
  await writeFile(
    config,
    JSON.stringify({
      graphs: { agent: path.join(repoRoot, "test/graphs/agent.ts:graph") },
      http: { configurable_headers: { includes: ["x-user-*", "user-agent", "x-api-key"], excludes: ["x-user-secret"] } },
    }),
  );
  const srv = await startTestServer({ env: { LANGGRAPH_JSON: config } });
  t.teardown(() => srv.close());
  const thread = await srv.client.threads.create();
  await fetch(`${srv.url}/threads/${thread.thread_id}/runs/wait`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "x-user-id": "u1",
      "X-User-Org": "o1",
      "x-user-secret": "no",
      "user-agent": "ua/1",
      "x-other": "no",
      "x-api-key": "never",
    },
    body: JSON.stringify({ assistant_id: "agent", input: { messages: [human("x")] } }),
  });
  const [run] = await srv.client.runs.list(thread.thread_id);
  const configurable = (run as unknown as { kwargs: { config: { configurable: Record<string, unknown> } } }).kwargs.config.configurable;
  t.match(configurable, { "x-user-id": "u1", "x-user-org": "o1", "user-agent": "ua/1" });
  t.notOk("x-user-secret" in configurable, "excludes win");
  t.notOk("x-other" in configurable);
  t.notOk("x-api-key" in configurable, "the API key never reaches the log");
});

t.test("with LANGGRAPH_API_KEY the actor is the key's name", async (t) => {
  const srv = await startTestServer({ env: { LANGGRAPH_API_KEY: "k-audit" } });
  t.teardown(() => srv.close());
  const thread = await srv.client.threads.create();
  const { body } = await getJson<AuditEvent[]>(`${srv.url}/threads/${thread.thread_id}/events`, { "x-api-key": "k-audit" });
  t.equal(body[0].metadata.actor, "api-key");
  t.equal((await fetch(`${srv.url}/threads/${thread.thread_id}/events`)).status, 401);
  const assistants = await srv.client.assistants.search({ graphId: "agent" });
  const { body: system } = await getJson<AuditEvent[]>(`${srv.url}/threads/${thread.thread_id}/events`, { "x-api-key": "k-audit" });
  t.ok(assistants.length > 0 && system.length === 1);
});
