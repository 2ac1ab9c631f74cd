import t, { type Test } from "tap";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { ABANDONED_CLAIM_MS, idempotencyStream } from "../../src/domain/idempotency.js";
import { threadStream } from "../../src/domain/threads.js";
import { openEsdbStore } from "../../src/eventstore/esdb.js";
import type { EventStore, RecordedEvent } from "../../src/eventstore/types.js";
import { startEsdbTestDouble, type EsdbTestDouble } from "../support/esdb-test-double.js";
import { spawnServer, type ServerProcess } from "../support/process.js";
import { startTestServer, TEST_GRAPHS, type TestServer } from "../support/server.js";
import { signToken } from "../auth/jwt.js";

/**
 * `Idempotency-Key` races, proven rather than hoped for: the EventStoreDB test double holds the appends a
 * test picks (`holdAppends`) until the test releases them, so "both requests have claimed the key before
 * either claim was applied" is an event the test awaits, not a matter of Promise.all timing. Then:
 * - twins (one server, or two servers on one log): one claim wins, one run, both answers name it;
 * - keys are per caller under custom auth: bob's request with alice's key never gets alice's run, even
 *   when both claims are at the log at once;
 * - a claim whose process died before it recorded its run is taken over by another process once the
 *   abandonment rule (ABANDONED_CLAIM_MS after the claim) frees it, and that process creates the run;
 * - the TTL (IDEMPOTENCY_KEY_TTL_SECS) runs from the claim as the claiming server's clock stamped it.
 * The dead process and the clocks: server processes whose clock is set off by CLOCK_OFFSET_MS
 * (test/support/skewed-clock-server.ts), so a claim is a minute old, or an hour away from the test's
 * clock, without waiting.
 */

t.setTimeout(180_000);

const AUTH_PROJECT = path.join(path.join(path.dirname(fileURLToPath(import.meta.url)), ".."), "auth", "langgraph.json");
const ALL_SCOPES = ["threads:read", "threads:write", "assistants:read", "assistants:write"];
const SKEWED_SERVER = "test/support/skewed-clock-server.ts";

const input = (content: string) => ({ messages: [{ role: "user", content }] });

interface Answer {
  status: number;
  body: { run_id?: string; thread_id?: string; detail?: string };
  /** Epoch ms (the test's clock) when the request was sent and when its answer came. */
  sentAt: number;
  answeredAt: number;
}

async function post(url: string, body: unknown, key: string | undefined, token?: string): Promise<Answer> {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (key !== undefined) headers["idempotency-key"] = key;
  if (token) headers.authorization = `Bearer ${token}`;
  const sentAt = Date.now();
  const res = await fetch(url, { method: "POST", headers, body: JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : {}) as Answer["body"], sentAt, answeredAt: Date.now() };
}

/** Rejects when `promise` has not settled after `ms`: a guard that turns a hang into a failure that says what. */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`not within ${ms} ms: ${what}`)), ms)));
  return Promise.race([promise, expired]).finally(() => clearTimeout(timer));
}

async function double(t: Test): Promise<EsdbTestDouble> {
  const d = await startEsdbTestDouble();
  t.teardown(() => d.close());
  return d;
}

/** A direct reader of the log (as any process sharing it). */
async function logReader(t: Test, d: EsdbTestDouble): Promise<EventStore> {
  const store = await openEsdbStore({ connectionString: d.connectionString });
  t.teardown(() => store.close());
  return store;
}

async function server(t: Test, d: EsdbTestDouble, env: Record<string, string> = {}): Promise<TestServer> {
  const srv = await startTestServer({ env: { EVENTSTORE_URL: d.connectionString, ...env } });
  t.teardown(() => srv.close());
  return srv;
}

/** A server process whose clock is `offsetMs` away from the test's (see test/support/skewed-clock-server.ts). */
async function skewedProcess(t: Test, d: EsdbTestDouble, offsetMs: number, env: Record<string, string> = {}): Promise<ServerProcess & { url: string }> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), "agent-server-idem-race-"));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const p = await spawnServer(
    { EVENTSTORE_URL: d.connectionString, LANGGRAPH_JSON: TEST_GRAPHS, DATA_DIR: dataDir, CLOCK_OFFSET_MS: String(offsetMs), ...env },
    SKEWED_SERVER,
  );
  t.teardown(async () => {
    if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill("SIGTERM");
    await p.exited;
  });
  if (!p.url) throw new Error(`the server process did not start: ${p.stderr}`);
  return p as ServerProcess & { url: string };
}

/** The key's stream as the log holds it: event types and data. */
async function keyEvents(store: EventStore, key: string, identity = ""): Promise<RecordedEvent[]> {
  return store.readStream(idempotencyStream(key, identity));
}

const claimsOf = (events: RecordedEvent[]) =>
  events.filter((e) => e.type === "IdempotencyKeyClaimed").map((e) => e.data as { run_id: string; claimed_at: string; expires_at: number });

const runIds = async (srv: TestServer, threadId: string) => (await srv.client.runs.list(threadId, { limit: 100 })).map((r) => r.run_id).sort();

/** Holds the claims appended to these key streams. */
const holdClaims = (d: EsdbTestDouble, streams: string[]) =>
  d.holdAppends((stream, types) => streams.includes(stream) && types.includes("IdempotencyKeyClaimed"));

t.test("twins on one server: both claims reach the log before either is applied; one wins, one run, both answers name it", async (t) => {
  const d = await double(t);
  const srv = await server(t, d);
  const thread = await srv.client.threads.create();
  const url = `${srv.url}/threads/${thread.thread_id}/runs`;
  const body = { assistant_id: "agent", input: input("twins") };
  const key = "race-twins-1";
  const stream = idempotencyStream(key, "");

  const gate = holdClaims(d, [stream]);
  const answers = Promise.all([post(url, body, key), post(url, body, key)]);
  await within(gate.reached(2), 20_000, "both twins' claims reach the log");
  t.same(
    gate.held.map((h) => h.stream),
    [stream, stream],
    "both requests found the key free and sent a claim: they overlap",
  );
  t.same(await keyEvents(srv.server.store, key), [], "neither claim is applied yet");
  t.equal(gate.release(), 2, "released in arrival order");

  const [a, b] = await within(answers, 30_000, "both twins answer");
  t.same([a.status, b.status], [200, 200], "both succeed");
  t.ok(a.body.run_id, "a run is named");
  t.equal(b.body.run_id, a.body.run_id, "both answers name the same run");
  const events = await keyEvents(srv.server.store, key);
  t.same(
    events.map((e) => e.type),
    ["IdempotencyKeyClaimed", "IdempotentRunCreated"],
    "one claim was applied (the other conflicted), then the run was recorded",
  );
  t.equal(claimsOf(events)[0].run_id, a.body.run_id, "the winning claim is the run both got");
  await srv.client.runs.join(thread.thread_id, a.body.run_id!);
  t.same(await runIds(srv, thread.thread_id), [a.body.run_id], "one run on the thread");
});

t.test("twins on two servers sharing the log: the same, across processes", async (t) => {
  const d = await double(t);
  const one = await server(t, d);
  const two = await server(t, d);
  const thread = await one.client.threads.create();
  const body = { assistant_id: "agent", input: input("twins on two servers") };
  const key = "race-twins-2";
  const stream = idempotencyStream(key, "");

  const gate = holdClaims(d, [stream]);
  const answers = Promise.all([post(`${one.url}/threads/${thread.thread_id}/runs`, body, key), post(`${two.url}/threads/${thread.thread_id}/runs`, body, key)]);
  await within(gate.reached(2), 20_000, "both servers' claims reach the log");
  t.same(await keyEvents(one.server.store, key), [], "neither claim is applied yet");
  gate.release();

  const [a, b] = await within(answers, 30_000, "both servers answer");
  t.same([a.status, b.status], [200, 200]);
  t.equal(b.body.run_id, a.body.run_id, "both answers name the same run");
  t.same(
    (await keyEvents(one.server.store, key)).map((e) => e.type),
    ["IdempotencyKeyClaimed", "IdempotentRunCreated"],
  );
  await one.client.runs.join(thread.thread_id, a.body.run_id!);
  t.same(await runIds(one, thread.thread_id), [a.body.run_id], "one run");
  t.same(await runIds(two, thread.thread_id), [a.body.run_id], "the other server sees the same one");
});

t.test("custom auth: keys are per caller; bob's request with alice's key never gets alice's run", async (t) => {
  const d = await double(t);
  const srv = await server(t, d, { LANGGRAPH_JSON: AUTH_PROJECT });
  const alice = await signToken("alice", ALL_SCOPES);
  const bob = await signToken("bob", ALL_SCOPES);
  const key = "shared-key";
  const body = { assistant_id: "agent", input: input("the same body"), on_completion: "keep" };

  // Stateless runs with the same key and the same body, both claims at the log at once.
  const streams = [idempotencyStream(key, "alice"), idempotencyStream(key, "bob")];
  t.not(streams[0], streams[1], "one stream per caller");
  const gate = holdClaims(d, streams);
  const answers = Promise.all([post(`${srv.url}/runs`, body, key, alice), post(`${srv.url}/runs`, body, key, bob)]);
  await within(gate.reached(2), 20_000, "alice's and bob's claims reach the log");
  t.same(gate.held.map((h) => h.stream).sort(), [...streams].sort(), "each claimed the key on their own stream");
  gate.release();
  const [fromAlice, fromBob] = await within(answers, 30_000, "both answer");
  t.same([fromAlice.status, fromBob.status], [200, 200], "neither conflicts with the other");
  t.ok(fromBob.body.run_id && fromBob.body.run_id !== fromAlice.body.run_id, "bob gets his own run");
  t.not(fromBob.body.thread_id, fromAlice.body.thread_id, "on his own thread");
  const againAlice = await post(`${srv.url}/runs`, body, key, alice);
  const againBob = await post(`${srv.url}/runs`, body, key, bob);
  t.equal(againAlice.body.run_id, fromAlice.body.run_id, "alice's retry: her run");
  t.equal(againBob.body.run_id, fromBob.body.run_id, "bob's retry: his run, still not alice's");
  t.same(
    claimsOf(await keyEvents(srv.server.store, key, "alice")).map((c) => c.run_id),
    [fromAlice.body.run_id],
  );
  t.same(
    claimsOf(await keyEvents(srv.server.store, key, "bob")).map((c) => c.run_id),
    [fromBob.body.run_id],
  );

  // On a thread: alice's key on alice's thread; bob cannot reach her thread, and on his own he gets a new run.
  const thread = (await post(`${srv.url}/threads`, {}, undefined, alice).then((r) => r.body)) as { thread_id: string };
  const aliceRun = await post(`${srv.url}/threads/${thread.thread_id}/runs`, { assistant_id: "agent", input: input("x") }, "k2", alice);
  t.equal(aliceRun.status, 200);
  const bobOnAlices = await post(`${srv.url}/threads/${thread.thread_id}/runs`, { assistant_id: "agent", input: input("x") }, "k2", bob);
  t.equal(bobOnAlices.status, 404, "bob, alice's key, alice's thread: not found, not her run");
  t.notOk(bobOnAlices.body.run_id);
  const bobThread = (await post(`${srv.url}/threads`, {}, undefined, bob).then((r) => r.body)) as { thread_id: string };
  const bobRun = await post(`${srv.url}/threads/${bobThread.thread_id}/runs`, { assistant_id: "agent", input: input("x") }, "k2", bob);
  t.equal(bobRun.status, 200);
  t.ok(bobRun.body.run_id && bobRun.body.run_id !== aliceRun.body.run_id, "bob, alice's key, his own thread: his own run");
  t.same(
    claimsOf(await keyEvents(srv.server.store, "k2", "alice")).map((c) => c.run_id),
    [aliceRun.body.run_id],
    "alice's key was not touched by bob's requests",
  );
});

t.test("a claim whose process died before recording its run is taken over by another process after the abandonment window", async (t) => {
  const d = await double(t);
  const log = await logReader(t, d);
  const b = await server(t, d);
  const thread = await b.client.threads.create();
  const body = { assistant_id: "agent", input: input("abandoned") };
  const key = "abandoned-1";

  // Process A's clock is a little more than the abandonment window behind: its claim is, to B, that old.
  const a = await skewedProcess(t, d, -(ABANDONED_CLAIM_MS + 1_000));
  // A claims the key, then its run's enqueue reaches the log and is held there.
  const gate = d.holdAppends((stream, types) => stream === threadStream(thread.thread_id) && types.includes("RunEnqueued"));
  const fromA = post(`${a.url}/threads/${thread.thread_id}/runs`, body, key).catch((error: unknown) => error);
  await within(gate.reached(1), 30_000, "A's run enqueue reaches the log");
  const [claimByA] = claimsOf(await keyEvents(log, key));
  t.ok(claimByA, "A's claim is in the log");
  t.ok(Date.now() - Date.parse(claimByA.claimed_at) > ABANDONED_CLAIM_MS, `stamped by A's clock, ${Date.now() - Date.parse(claimByA.claimed_at)} ms ago to B`);

  // While A lives, its own twin (its clock: the claim is fresh) does not take the claim over: it waits, then 409.
  const twin = await within(post(`${a.url}/threads/${thread.thread_id}/runs`, body, key), 20_000, "A's twin answers");
  t.equal(twin.status, 409, "a twin on A: still in progress");
  t.match(twin.body.detail, /still in progress/);

  // A dies before its run is written (and so before it could record it); its enqueue never lands.
  a.child.kill("SIGKILL");
  await a.exited;
  t.ok((await fromA) instanceof Error, "A's request died with it");
  t.equal(gate.drop(), 1, "A's enqueue was discarded, never applied");

  // B, with the same key and body: the claim is abandoned (no run, older than the window): B takes it over.
  const fromB = await post(`${b.url}/threads/${thread.thread_id}/runs`, body, key);
  t.equal(fromB.status, 200, "B creates the run");
  t.ok(fromB.body.run_id);
  t.not(fromB.body.run_id, claimByA.run_id, "its own run, not the one A never created");
  const events = await keyEvents(log, key);
  t.same(
    events.map((e) => e.type),
    ["IdempotencyKeyClaimed", "IdempotencyKeyClaimed", "IdempotentRunCreated"],
    "A's claim, B's claim after it, B's record",
  );
  t.same(
    claimsOf(events).map((c) => c.run_id),
    [claimByA.run_id, fromB.body.run_id],
  );
  t.same(events[2].data, { run_id: fromB.body.run_id, thread_id: thread.thread_id }, "B's record names its run");
  await b.client.runs.join(thread.thread_id, fromB.body.run_id!);
  t.same(await runIds(b, thread.thread_id), [fromB.body.run_id], "exactly one run on the thread: B's");
  const again = await post(`${b.url}/threads/${thread.thread_id}/runs`, body, key);
  t.equal(again.body.run_id, fromB.body.run_id, "a retry now gets B's run");
  t.equal((await post(`${b.url}/threads/${thread.thread_id}/runs`, { ...body, input: input("other") }, key)).status, 409, "another body: 409");
});

t.test("the TTL runs from the claim as the claiming server's clock stamped it, not from the client's clock", async (t) => {
  const d = await double(t);
  const log = await logReader(t, d);
  // The server's clock is an hour behind the client's (the test's): by the client's clock the key would
  // have expired an hour ago; by the server's it lasts TTL_SECS from its claim.
  const OFFSET_MS = -3_600_000;
  const TTL_SECS = 4;
  const srv = await skewedProcess(t, d, OFFSET_MS, { IDEMPOTENCY_KEY_TTL_SECS: String(TTL_SECS) });
  const thread = (await post(`${srv.url}/threads`, {}, undefined).then((r) => r.body)) as { thread_id: string };
  const url = `${srv.url}/threads/${thread.thread_id}/runs`;
  const key = "ttl-1";

  const first = await post(url, { assistant_id: "agent", input: input("one") }, key);
  t.equal(first.status, 200);
  const [claim] = claimsOf(await keyEvents(log, key));
  const claimedAt = Date.parse(claim.claimed_at);
  t.ok(
    claimedAt >= first.sentAt + OFFSET_MS && claimedAt <= first.answeredAt + OFFSET_MS,
    "claimed_at is the server's clock during the request (an hour behind the client's)",
  );
  t.equal(claim.expires_at, claimedAt + TTL_SECS * 1000, "expires_at = the server's claim time + IDEMPOTENCY_KEY_TTL_SECS");
  t.ok(claim.expires_at < Date.now(), "by the client's clock that instant is long past");
  const expiresOnTestClock = claim.expires_at - OFFSET_MS;

  // Shortly before the server's expiry (answered before it, so decided before it): still held.
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, expiresOnTestClock - 1500 - Date.now())));
  const before = await post(url, { assistant_id: "agent", input: input("two") }, key);
  t.ok(before.answeredAt < expiresOnTestClock, `answered ${expiresOnTestClock - before.answeredAt} ms before the server's expiry`);
  t.equal(before.status, 409, "until the server's claim time + TTL: another body is refused");

  // From the server's expiry on (sent after it, so decided after it): free, without polling.
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, expiresOnTestClock - Date.now() + 1)));
  const after = await post(url, { assistant_id: "agent", input: input("two") }, key);
  t.ok(after.sentAt >= expiresOnTestClock, "sent once the server's clock reached expires_at");
  t.equal(after.status, 200, "expired: the key takes another request");
  t.not(after.body.run_id, first.body.run_id, "a new run");
  const claims = claimsOf(await keyEvents(log, key));
  t.equal(claims.length, 2, "claimed again");
  t.ok(Date.parse(claims[1].claimed_at) >= claim.expires_at, "the second claim is at or after the first's expiry, on the server's clock");
});

t.test("a claim whose process created its run and died before recording it: another process answers with that run", async (t) => {
  const d = await double(t);
  const log = await logReader(t, d);
  const b = await server(t, d);
  const thread = await b.client.threads.create();
  const body = { assistant_id: "agent", input: input("created, not recorded") };
  const key = "created-not-recorded-1";
  const stream = idempotencyStream(key, "");

  // A claims the key and creates its run; its record of the run reaches the log and is held there.
  const a = await skewedProcess(t, d, 0);
  const gate = d.holdAppends((s, types) => s === stream && types.includes("IdempotentRunCreated"));
  const fromA = post(`${a.url}/threads/${thread.thread_id}/runs`, body, key).catch((error: unknown) => error);
  await within(gate.reached(1), 30_000, "A's record of its run reaches the log");
  const [claimByA] = claimsOf(await keyEvents(log, key));
  t.ok(claimByA, "A's claim is in the log");
  a.child.kill("SIGKILL");
  await a.exited;
  t.ok((await fromA) instanceof Error, "A's request died with it");
  t.equal(gate.drop(), 1, "A's record was discarded, never applied");

  // B shows A's run (a get catches up with the thread's stream), then gets the same request with the same key.
  t.equal((await b.client.runs.get(thread.thread_id, claimByA.run_id)).run_id, claimByA.run_id, "A's run is in the log");
  const fromB = await within(post(`${b.url}/threads/${thread.thread_id}/runs`, body, key), 20_000, "B answers");
  t.equal(fromB.status, 200, "B answers at once, without waiting for the claim to be abandoned");
  t.equal(fromB.body.run_id, claimByA.run_id, "with the run A created: no second run");
  t.same(
    (await keyEvents(log, key)).map((e) => e.type),
    ["IdempotencyKeyClaimed", "IdempotentRunCreated"],
    "B recorded A's run for the key",
  );
  t.same(await runIds(b, thread.thread_id), [claimByA.run_id], "exactly one run on the thread");
});
