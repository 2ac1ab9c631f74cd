import t, { type Test } from "tap";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import * as grpc from "@grpc/grpc-js";
import { AccessDeniedError, NotLeaderError, UnavailableError } from "@eventstore/db-client";
import { loadConfig } from "../../src/config.js";
import { openStore } from "../../src/eventstore/open.js";
import { LogHealth } from "../../src/eventstore/log-health.js";
import { StoreUnavailableError, type EventStore } from "../../src/eventstore/types.js";
import { startEsdbTestDouble, type EsdbTestDouble, type EsdbTestDoubleOptions } from "../support/esdb-test-double.js";
import { generateTestCertificates } from "../support/test-certificates.js";

/**
 * NotLeader and access denied through OUR adapter (src/eventstore/esdb.ts), opened the way the server opens
 * it (loadConfig → openStore, EVENTSTORE_URL with `nodePreference=leader`), against the EventStoreDB test
 * double:
 * - a node that answers NotLeader naming the leader: the adapter tries again, the client follows the hint,
 *   the event is written on the leader and not on the node that refused it;
 * - NotLeader that lasts past the adapter's deadline (or a leader nobody can reach): StoreUnavailableError,
 *   the class the HTTP edge answers 503 with, after retries up to the deadline;
 * - calls without (valid) credentials to a server that requires them (over TLS: gRPC sends credentials on
 *   secure channels only): refused as the server refuses them (anonymous: PERMISSION_DENIED "access denied";
 *   a wrong password: UNAUTHENTICATED; both the client's AccessDeniedError), surfaced as such, not retried,
 *   not taken for unavailability.
 */

const DEADLINE_MS = 1500;

async function double(t: Test, options?: EsdbTestDoubleOptions): Promise<EsdbTestDouble> {
  const d = await startEsdbTestDouble(options);
  t.teardown(() => d.close());
  return d;
}

/** The store as the server opens it (src/startup/log.ts): from the configuration, with a LogHealth. */
async function serverStore(t: Test, eventstoreUrl: string, deadlineMs = DEADLINE_MS): Promise<EventStore> {
  const config = loadConfig({ EVENTSTORE_URL: eventstoreUrl, EVENTSTORE_DEADLINE_MS: String(deadlineMs) });
  const store = await openStore({ ...config, health: new LogHealth() });
  t.teardown(() => store.close());
  return store;
}

/** The connection string with `nodePreference=leader`: every call requires the leader. */
const leaderOnly = (d: EsdbTestDouble) => `${d.connectionString}&nodePreference=leader`;

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected a rejection");
}

/** The chain of causes, outermost first. */
function causes(error: unknown): unknown[] {
  const chain: unknown[] = [];
  for (let e = error; e !== undefined && chain.length < 10; e = (e as { cause?: unknown }).cause) chain.push(e);
  return chain;
}

const ev = (type: string, data: Record<string, unknown>) => ({ type, data });

t.test("NotLeader naming the leader: the adapter retries, the append lands on the leader and not on the follower", async (t) => {
  const leader = await double(t);
  const follower = await double(t);
  const store = await serverStore(t, leaderOnly(follower), 10_000);
  t.equal(store.kind, "esdb");
  // The node the server is connected to loses the leadership; it names the new leader.
  follower.answerNotLeader({ host: "127.0.0.1", port: leader.port });

  const result = await store.append("not-leader-a", [ev("One", { on: "leader" })], "no_stream");
  t.equal(result.nextExpectedRevision, 0n, "the append succeeded (as the stream's first event)");
  t.ok(follower.stats.notLeaderAnswers >= 1, `the follower answered NotLeader (${follower.stats.notLeaderAnswers})`);

  const onLeader = await serverStore(t, leader.connectionString);
  const events = await onLeader.readStream("not-leader-a");
  t.same(
    events.map((e) => [e.type, e.data]),
    [["One", { on: "leader" }]],
    "the event is on the leader",
  );
  t.equal(events[0].position, result.position, "at the position the append reported");
  t.same(
    (await store.readStream("not-leader-a")).map((e) => e.data),
    [{ on: "leader" }],
    "the adapter now reads from the leader",
  );

  await follower.heal();
  const onFollower = await serverStore(t, follower.connectionString);
  t.same(await onFollower.readStream("not-leader-a"), [], "nothing was written on the follower");
});

t.test("NotLeader beyond the deadline: StoreUnavailableError after retrying up to it, nothing written", async (t) => {
  const follower = await double(t);
  const store = await serverStore(t, leaderOnly(follower));
  // A node that keeps answering NotLeader naming itself (an election that does not end).
  follower.answerNotLeader();
  const started = Date.now();
  const error = await rejection(store.append("not-leader-b", [ev("One", {})]));
  const elapsed = Date.now() - started;
  t.ok(error instanceof StoreUnavailableError, `StoreUnavailableError, not just any error (${String(error)})`);
  t.match((error as Error).message, new RegExp(`did not complete an append to not-leader-b within ${DEADLINE_MS} ms`), "the adapter's deadline ended it");
  t.ok(
    causes(error).some((e) => e instanceof NotLeaderError),
    "caused by the server's NotLeader answers",
  );
  t.ok(follower.stats.notLeaderAnswers >= 2, `tried more than once (${follower.stats.notLeaderAnswers} NotLeader answers)`);
  t.ok(elapsed >= DEADLINE_MS - 50, `not given up before the deadline (${elapsed} ms)`);
  t.ok(elapsed < DEADLINE_MS + 3000, `nor long after it (${elapsed} ms)`);

  await follower.heal();
  t.same(await store.readStream("not-leader-b"), [], "healed: nothing was written");
});

t.test("NotLeader naming a leader nobody can reach: StoreUnavailableError at the deadline", async (t) => {
  const gone = await startEsdbTestDouble();
  const unreachable = gone.port;
  await gone.close();
  const follower = await double(t);
  const store = await serverStore(t, leaderOnly(follower));
  follower.answerNotLeader({ host: "127.0.0.1", port: unreachable });
  const started = Date.now();
  const error = await rejection(store.append("not-leader-c", [ev("One", {})]));
  const elapsed = Date.now() - started;
  t.ok(error instanceof StoreUnavailableError, `StoreUnavailableError (${String(error)})`);
  t.match((error as Error).message, new RegExp(`within ${DEADLINE_MS} ms`), "at the adapter's deadline");
  t.ok(
    causes(error).some((e) => e instanceof NotLeaderError || e instanceof UnavailableError),
    "caused by NotLeader or the unreachable leader",
  );
  t.ok(follower.stats.notLeaderAnswers >= 1, "the follower named the leader");
  t.ok(elapsed >= DEADLINE_MS - 50 && elapsed < DEADLINE_MS + 3000, `ended at the deadline (${elapsed} ms)`);
  await follower.heal();
  t.same(await store.readStream("not-leader-c"), [], "nothing was written");
});

t.test("anonymous calls to a secure server (TLS, credentials required): AccessDeniedError, not retried, not unavailable", async (t) => {
  const certificates = await generateTestCertificates();
  t.teardown(() => certificates.remove());
  const credentials = { username: "admin", password: "changeit" };

  // At start: the server's first call is refused; the open fails at once and says why.
  const secure = await double(t, { tls: certificates, credentials });
  const anonymousUrl = leaderOnly(secure).replace("admin:changeit@", "");
  t.notMatch(anonymousUrl, /@/, "no credentials in the connection string");
  const started = Date.now();
  const atOpen = await rejection(serverStore(t, anonymousUrl, 10_000));
  t.ok(Date.now() - started < 5000, "refused at once, not after the deadline");
  const deniedAtOpen = causes(atOpen).find((e) => e instanceof AccessDeniedError) as AccessDeniedError | undefined;
  t.ok(deniedAtOpen, `the client's AccessDeniedError (${String(atOpen)})`);
  t.equal(deniedAtOpen?.code, grpc.status.PERMISSION_DENIED, "the server's answer to an anonymous call: PERMISSION_DENIED, access denied");
  t.equal(secure.stats.deniedCalls, 1, "one call, refused once: not retried");
  t.notMatch((atOpen as Error).message, /cannot reach/, "not reported as an unreachable log");

  // Running: a server that starts requiring credentials (restarted secure) refuses what it served before.
  const dir = await mkdtemp(path.join(os.tmpdir(), "esdb-not-leader-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const open = await startEsdbTestDouble({ tls: certificates, dataFile: path.join(dir, "log.jsonl") });
  const holder = { d: open };
  t.teardown(() => holder.d.close());
  t.notMatch(open.connectionString, /@/, "a double that requires no credentials has none in its connection string");
  const anonymous = await serverStore(t, leaderOnly(open), 10_000);
  const wrongPassword = await serverStore(t, leaderOnly(open).replace("esdb://", "esdb://admin:wrong@"), 10_000);
  await anonymous.append("denied-a", [ev("One", {})]);
  await wrongPassword.append("denied-b", [ev("One", {})]);
  holder.d = await open.restart({ credentials });

  for (const [name, store, code, stream] of [
    ["anonymous", anonymous, grpc.status.PERMISSION_DENIED, "denied-a"],
    ["a wrong password", wrongPassword, grpc.status.UNAUTHENTICATED, "denied-b"],
  ] as const) {
    const before = holder.d.stats.deniedCalls;
    const deniedAt = Date.now();
    const denied = await rejection(store.append(stream, [ev("Two", {})]));
    const took = Date.now() - deniedAt;
    t.ok(denied instanceof AccessDeniedError, `${name}: the append fails with the client's AccessDeniedError itself (${String(denied)})`);
    t.equal((denied as AccessDeniedError).code, code, `${name}: as the server answers it (${grpc.status[code]})`);
    t.notOk(denied instanceof StoreUnavailableError, `${name}: not as unavailable (no 503 with Retry-After, no retry)`);
    t.equal(holder.d.stats.deniedCalls - before, 1, `${name}: refused once, the adapter did not try again`);
    t.ok(took < 5000, `${name}: failed at once, well before the deadline (${took} ms)`);
  }
  const admin = await serverStore(t, leaderOnly(holder.d), 10_000);
  t.same(
    (await admin.readStream("denied-a")).map((e) => e.type),
    ["One"],
    "nothing of the refused append was written",
  );
});
