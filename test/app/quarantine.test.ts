/**
 * No event can stop a projection, and a server always starts. Events written straight into the log,
 * around the server's checks (a run whose input is nested 3000 levels deep, a claim without data, a
 * row whose JSON is broken, a run record without its kwargs), are quarantined: recorded with where
 * they are and why, reported by /ok, /metrics and GET /audit/quarantine, and skipped. The server
 * starts on such a log, serves every other thread, and starts again on the same data; once fixed,
 * `npm run rebuild` folds again what now folds. One poisoned event costs its batch nothing else, a
 * listener that throws only its own event, and a cron the scheduler cannot fire is tried once.
 */
import { execFile } from "node:child_process";
import { rm } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";
import t, { type Test } from "tap";
import { EventStoreDBClient, binaryEvent } from "@eventstore/db-client";
import { v7 as uuidv7 } from "uuid";
import { repoRoot, startTestServer, type TestServer } from "../support/server.js";
import { startEsdbTestDouble } from "../support/esdb-test-double.js";
import { metricValue } from "../support/metrics.js";
import { deepInputEnqueue, deepInputEnqueueText, rawLog, rewriteStoredData, threadWithRunWithoutKwargs, withDeepValue } from "../support/poison.js";
import { threadStream } from "../../src/domain/threads.js";
import { runStream } from "../../src/domain/runs.js";
import { cronStream } from "../../src/domain/crons.js";
import { CronScheduler } from "../../src/app/cron-scheduler.js";
import { FakeClock } from "../support/fake-clock.js";
import { signToken } from "../auth/jwt.js";
import type { RecordedEvent } from "../../src/eventstore/types.js";
import type { QuarantinePage } from "../../src/app/quarantine.js";
import { logWithReadModels } from "../support/log-with-read-models.js";

type Entry = QuarantinePage["entries"][number];

const hello = (content: string) => ({ messages: [{ role: "user", content }] });

/** A thread with one finished run; the thread's RunEnqueued (a model for poisoned ones) and the run's id. */
async function threadWithRun(srv: TestServer): Promise<{ threadId: string; runId: string; enqueued: RecordedEvent }> {
  const thread = await srv.client.threads.create();
  await srv.client.runs.wait(thread.thread_id, "agent", { input: hello("before the poison") });
  const enqueued = (await srv.server.store.readStream(threadStream(thread.thread_id))).find((e) => e.type === "RunEnqueued")!;
  return { threadId: thread.thread_id, runId: (enqueued.data as { run: { run_id: string } }).run.run_id, enqueued };
}

async function quarantineList(url: string): Promise<Entry[]> {
  const res = await fetch(`${url}/audit/quarantine`);
  if (res.status !== 200) throw new Error(`GET /audit/quarantine: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { entries: Entry[] }).entries;
}

/** Another thread is served end to end: created, and a run waited for through the official SDK. */
async function servesOthers(t: Test, srv: TestServer, what: string): Promise<void> {
  const thread = await srv.client.threads.create();
  const values = (await srv.client.runs.wait(thread.thread_id, "agent", { input: hello(what) })) as { messages: { content: string }[] };
  t.equal(values.messages.at(-1)?.content, `You said: ${what}`, `another thread is served (${what})`);
}

/** /ok answers 200, ok, with the quarantine in its detail. */
async function okReports(t: Test, srv: TestServer, wanted: Record<string, number>): Promise<void> {
  const res = await fetch(`${srv.url}/ok`);
  const body = (await res.json()) as { ok: boolean; quarantine?: { entries: number; by_subscriber: Record<string, number>; list: string } };
  t.equal(res.status, 200, "/ok answers 200");
  t.equal(body.ok, true, "/ok says ok: everything else is served");
  const entries = Object.values(wanted).reduce((a, b) => a + b, 0);
  t.same(body.quarantine, { entries, by_subscriber: wanted, list: "/audit/quarantine" }, "/ok reports the quarantine, and nothing else was skipped");
  for (const [subscriber, count] of Object.entries(wanted)) {
    t.equal(await metricValue(srv.url, "agent_server_quarantined_entries", { subscriber }), count, `/metrics: ${count} quarantined by ${subscriber}`);
  }
}

t.test("SQLite: a poisoned data directory starts, serves, reports its quarantine, and starts again", async (t) => {
  const first = await startTestServer();
  const dataDir = first.dataDir;
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const a = await threadWithRun(first);
  await first.server.close();

  // Written around the server, as an older version, a restore or a hand edit could have.
  const log = await rawLog({ dataDir });
  const deepAt = (await log.append(threadStream(a.threadId), [deepInputEnqueue(a.enqueued, 3000).event])).position;
  const claimAt = (await log.append(runStream(a.runId), [{ type: "RunClaimed", data: null }])).position;
  const created = (id: string, metadata: unknown = {}) => ({ type: "ThreadCreated", data: { thread_id: id, metadata, created_at: new Date().toISOString() } });
  const [brokenThread, deeperThread] = [uuidv7(), uuidv7()];
  const brokenAt = (await log.append(threadStream(brokenThread), [created(brokenThread)])).position;
  const deeperAt = (await log.append(threadStream(deeperThread), [created(deeperThread)])).position;
  const noKwargs = threadWithRunWithoutKwargs(a.enqueued);
  await log.append(threadStream(noKwargs.threadId), noKwargs.events, "no_stream");
  await log.close();
  rewriteStoredData(dataDir, brokenAt, '{"thread_id": ');
  rewriteStoredData(dataDir, deeperAt, withDeepValue(created(deeperThread, "<deep>").data, 100_000));

  // Before the quarantine, this start failed with "Maximum call stack size exceeded".
  let srv = await startTestServer({ dataDir });
  t.teardown(() => srv.server.close());
  await okReports(t, srv, { "read-models": 5 });
  const entries = await quarantineList(srv.url);
  const at = (position: bigint) => entries.find((e) => e.subscriber === "read-models" && e.position === String(position));
  t.match(
    at(deepAt),
    { stream: threadStream(a.threadId), revision: "3", type: "RunEnqueued", error: /Maximum call stack size exceeded/ },
    "the deep input: where and why",
  );
  t.match(at(claimAt), { stream: runStream(a.runId), type: "RunClaimed", error: /TypeError/ }, "the claim without data");
  t.match(at(brokenAt), { stream: threadStream(brokenThread), revision: "0", type: "ThreadCreated", error: /not valid JSON/ }, "the broken JSON");
  t.match(
    at(deeperAt),
    { stream: threadStream(deeperThread), revision: "0", type: "ThreadCreated", error: /nested too deeply to read/ },
    "data too deep to read at all",
  );
  t.match(
    entries.find((e) => e.stream === threadStream(noKwargs.threadId)),
    { subscriber: "read-models", revision: "1", type: "RunEnqueued", error: /TypeError/ },
    "the run record without kwargs",
  );

  await servesOthers(t, srv, "after the poison");
  t.equal((await srv.client.threads.get(a.threadId)).status, "idle", "the poisoned thread reads as its events before the poison");
  // A read that goes to the log for this one thread: a clear error naming the event, for this thread alone.
  const unreadable = await fetch(`${srv.url}/threads/${brokenThread}`);
  t.equal(unreadable.status, 500);
  t.match(
    await unreadable.json(),
    { detail: new RegExp(`ThreadCreated in stream "thread-${brokenThread}" at revision 0: data is not valid JSON`) },
    "the answer names the event",
  );

  // Again on the same data: nothing is folded or recorded twice.
  srv = await srv.restart();
  await okReports(t, srv, { "read-models": 5 });
  t.same(await quarantineList(srv.url), entries, "the same records, none twice");
  await servesOthers(t, srv, "after a restart");

  // The operator's fix (here: the broken row repaired; usually the code that threw), then `npm run rebuild`:
  // what folds now leaves the quarantine, the rest is quarantined again.
  await srv.server.close();
  rewriteStoredData(dataDir, brokenAt, JSON.stringify(created(brokenThread).data));
  const { stdout } = await promisify(execFile)(process.execPath, ["--import", "tsx", "src/read-models/rebuild.ts"], {
    cwd: repoRoot,
    env: { ...process.env, DATA_DIR: dataDir },
  });
  const report = JSON.parse(stdout.trim().split("\n").pop()!) as { rebuild: { quarantined: { entries: number } } };
  t.equal(report.rebuild.quarantined.entries, 4, "the rebuild reports what it still quarantined");
  srv = await startTestServer({ dataDir });
  await okReports(t, srv, { "read-models": 4 });
  t.equal((await srv.client.threads.get(brokenThread)).thread_id, brokenThread, "the repaired thread is served");
  t.notOk(
    (await quarantineList(srv.url)).some((e) => e.stream === threadStream(brokenThread)),
    "and is no longer quarantined",
  );
});

t.test("EventStoreDB: poison appended live and found at start is quarantined; every start and restart serves", async (t) => {
  const esdb = await startEsdbTestDouble();
  t.teardown(() => esdb.close());
  const env = { EVENTSTORE_URL: esdb.connectionString };
  let srv = await startTestServer({ env });
  t.teardown(() => srv.close());
  const a = await threadWithRun(srv);

  // Live: written by another client while the server follows the log, around its checks.
  const client = EventStoreDBClient.connectionString(esdb.connectionString);
  t.teardown(() => client.dispose());
  const raw = async (stream: string, type: string, text: string) =>
    (await client.appendToStream(stream, binaryEvent({ type, data: Buffer.from(text) }))).position!.commit;
  const deepAt = await raw(threadStream(a.threadId), "RunEnqueued", deepInputEnqueueText(a.enqueued, 100_000).text);
  const binaryThread = uuidv7();
  const binaryAt = await raw(threadStream(binaryThread), "ThreadCreated", '{"thread_id": ');
  const log = await rawLog({ eventstoreUrl: esdb.connectionString });
  t.teardown(() => log.close());
  const claimAt = (await log.append(runStream(a.runId), [{ type: "RunClaimed", data: null }])).position;
  const noKwargs = threadWithRunWithoutKwargs(a.enqueued);
  await log.append(threadStream(noKwargs.threadId), noKwargs.events, "no_stream");
  await srv.server.readModels.runner.waitFor(await log.headPosition());

  await okReports(t, srv, { "read-models": 4 });
  const entries = await quarantineList(srv.url);
  const at = (position: bigint) => entries.find((e) => e.subscriber === "read-models" && e.position === String(position));
  t.match(at(deepAt), { stream: threadStream(a.threadId), type: "RunEnqueued", error: /Maximum call stack size exceeded/ }, "the deep input, live");
  t.match(at(claimAt), { stream: runStream(a.runId), type: "RunClaimed", error: /TypeError/ }, "the claim without data, live");
  t.match(at(binaryAt), { stream: threadStream(binaryThread), type: "ThreadCreated" }, "the data that is not JSON, live");
  t.match(
    entries.find((e) => e.stream === threadStream(noKwargs.threadId)),
    { subscriber: "read-models", type: "RunEnqueued" },
    "the run record without kwargs, live",
  );
  await servesOthers(t, srv, "after live poison");

  // The same read models again, then new ones folded from the whole log (the start path meets every poison).
  srv = await srv.restart();
  await okReports(t, srv, { "read-models": 4 });
  t.same(await quarantineList(srv.url), entries, "the same records, none twice");
  await servesOthers(t, srv, "after a restart");
  const fresh = await startTestServer({ env });
  t.teardown(() => fresh.close());
  await okReports(t, fresh, { "read-models": 4 });
  t.same((await quarantineList(fresh.url)).map((e) => e.position).sort(), entries.map((e) => e.position).sort(), "new read models quarantine the same events");
  await servesOthers(t, fresh, "on new read models");
});

t.test("one batch: the events after a poisoned one are kept; a listener that throws is quarantined and the others still hear", async (t) => {
  // The log without the server's schema checks, and read models following it.
  const { store, readModels } = await logWithReadModels(t, "quarantine-batch-", { checked: false });
  const runner = readModels.runner;
  const heard: bigint[] = [];
  runner.onApplied((event) => heard.push(event.position));
  const failing = uuidv7();
  runner.onApplied((event) => {
    if (event.streamId === threadStream(failing)) throw new TypeError("this listener cannot handle it");
  }, "test-listener");

  // One append is one commit, delivered and folded as one batch: a poison in its middle.
  const id = uuidv7();
  const now = new Date().toISOString();
  const batchesBefore = runner.foldStats.batches;
  const appended = await store.append(threadStream(id), [
    { type: "ThreadCreated", data: { thread_id: id, metadata: {}, created_at: now } },
    { type: "ThreadUpdated", data: null },
    { type: "ThreadUpdated", data: { metadata: { after: "the poison" }, updated_at: now } },
  ]);
  await runner.waitFor(appended.position);
  t.equal(runner.foldStats.batches - batchesBefore, 1, "folded as one batch");
  t.match(readModels.threads.load(id), { revision: 2n, thread: { metadata: { after: "the poison" } } }, "the events before and after the poison are folded");
  const [entry] = runner.quarantine.list({ limit: 10 }).entries;
  t.match(
    entry,
    { subscriber: "read-models", stream: threadStream(id), revision: 1n, position: appended.position - 1n, type: "ThreadUpdated", error: /TypeError/ },
    "the poison is recorded where it is",
  );
  t.same(heard.slice(-2), [appended.position - 2n, appended.position], "listeners hear the folded events, not the quarantined one");

  // A listener that throws: recorded under its name; the other listeners and the fold go on.
  const next = await store.append(threadStream(failing), [{ type: "ThreadCreated", data: { thread_id: failing, metadata: {}, created_at: now } }]);
  const after = uuidv7();
  const last = await store.append(threadStream(after), [{ type: "ThreadCreated", data: { thread_id: after, metadata: {}, created_at: now } }]);
  await runner.waitFor(last.position);
  t.ok(heard.includes(next.position) && heard.includes(last.position), "the other listener heard both events");
  t.ok(readModels.threads.load(failing) && readModels.threads.load(after), "both were folded");
  t.same(runner.quarantine.summary(), { entries: 2, by_subscriber: { "read-models": 1, "test-listener": 1 } });
  t.match(runner.quarantine.list({ limit: 1 }).entries[0], {
    subscriber: "test-listener",
    position: next.position,
    error: "TypeError: this listener cannot handle it",
  });
});

t.test("the scheduler: a cron it cannot fire is quarantined once and left out, never fired in a loop; the others fire", async (t) => {
  const { store, readModels } = await logWithReadModels(t, "quarantine-crons-", { checked: false });
  const clock = new FakeClock(Date.parse("2030-01-01T00:00:30Z"));
  const created = (id: string) => ({
    type: "CronCreated",
    data: {
      cron_id: id,
      assistant_id: uuidv7(),
      thread_id: null,
      schedule: "* * * * *",
      timezone: "UTC",
      end_time: null,
      enabled: true,
      on_run_completed: null,
      metadata: {},
      user_id: null,
      payload: {},
      created_at: new Date(clock.now()).toISOString(),
    },
  });
  const [bad, good] = [uuidv7(), uuidv7()];
  await store.append(cronStream(bad), [created(bad)]);
  await readModels.runner.waitFor((await store.append(cronStream(good), [created(good)])).position);
  // A row as another version of the fold could have left it: a schedule this version cannot read.
  readModels.runner.db.prepare("UPDATE crons SET doc = json_set(doc, '$.schedule', 'not a schedule') WHERE cron_id = ?").run(bad);

  const fired: string[] = [];
  const logs: string[] = [];
  const scheduler = new CronScheduler({
    store,
    readModels,
    clock,
    catchUpMs: null,
    log: (m) => logs.push(m),
    startRun: async (cron) => {
      fired.push(cron.cron_id);
      return { run_id: uuidv7(), thread_id: uuidv7() };
    },
  });
  scheduler.start();
  t.teardown(() => scheduler.stop());
  for (const minute of ["01", "02", "03"]) {
    clock.set(`2030-01-01T00:${minute}:00Z`);
    scheduler.wake();
    // A cron fired again and again at once would keep the scheduler busy: idle() would never resolve.
    await scheduler.idle();
  }
  t.same(fired, [good, good, good], "the other cron fired each minute");
  t.match(
    readModels.runner.quarantine.list({ limit: 10 }).entries,
    [{ subscriber: "crons", stream: cronStream(bad), position: undefined, error: /CronPattern/ }],
    "the cron is quarantined",
  );
  t.equal(logs.filter((m) => m.includes(bad)).length, 1, "tried once, then left out");
  t.equal(readModels.crons.nextDue([]), clock.now() - 2 * 60_000, "its row still says it is due");
  t.equal(readModels.crons.nextDue([bad]), Date.parse("2030-01-01T00:04:00Z"), "left out, the next due time is the good cron's");
});

t.test("GET /audit/quarantine is not public: the API key applies, and with custom auth a user held to their own threads may not list it", async (t) => {
  const keyed = await startTestServer({ env: { LANGGRAPH_API_KEY: "s3cret-key" } });
  t.teardown(() => keyed.close());
  t.equal((await fetch(`${keyed.url}/audit/quarantine`)).status, 401, "without the key");
  const listed = await fetch(`${keyed.url}/audit/quarantine`, { headers: { "x-api-key": "s3cret-key" } });
  t.equal(listed.status, 200, "with the key");
  t.same(await listed.json(), { entries: [], next: null }, "nothing quarantined");
  for (const before of ["9223372036854775807", "9999999999999999999", "x"]) {
    const page = await fetch(`${keyed.url}/audit/quarantine?before=${before}`, { headers: { "x-api-key": "s3cret-key" } });
    t.equal(page.status, before === "9223372036854775807" ? 200 : 422, `before=${before}: a position of the log, else a 422 (never a 500)`);
  }

  const authed = await startTestServer({ env: { LANGGRAPH_JSON: path.join(repoRoot, "test", "auth", "langgraph.json") } });
  t.teardown(() => authed.close());
  t.equal((await fetch(`${authed.url}/audit/quarantine`)).status, 401, "without a token");
  const user = await signToken("alice", ["threads:read", "threads:write"]);
  const held = await fetch(`${authed.url}/audit/quarantine`, { headers: { authorization: `Bearer ${user}` } });
  t.equal(held.status, 403, "a user the threads:search handler filters sees no other tenant's streams");
});
