import { randomUUID } from "node:crypto";
import t from "tap";
import { backoffDelay, retryWithin, type BackoffPolicy } from "../../src/eventstore/backoff.js";
import { LogHealth, subscriptionLag } from "../../src/eventstore/log-health.js";
import { okAnswer, wantsLogCheck } from "../../src/http/log-health-report.js";
import { positionWaitDeadline } from "../../src/read-models/health.js";
import { openEsdbStore } from "../../src/eventstore/esdb.js";
import { toStoreUnavailable } from "../../src/eventstore/esdb-mapping.js";
import { StoreUnavailableError, WrongExpectedVersionError } from "../../src/eventstore/types.js";
import { startEsdbTestDouble } from "../support/esdb-test-double.js";

/** The pure parts of living with an unreachable log (backoff, retry within a deadline, health), and append retries on the adapter. */

const policy: BackoffPolicy = { baseMs: 100, maxMs: 2_000 };

t.test("backoff: doubles from the base, capped, with equal jitter", async (t) => {
  t.same(
    [0, 1, 2, 3, 4, 5, 10].map((n) => backoffDelay(n, policy, () => 0)),
    [50, 100, 200, 400, 800, 1000, 1000],
    "no jitter: half the step",
  );
  t.same(
    [0, 1, 2, 3, 4, 5, 10].map((n) => backoffDelay(n, policy, () => 1)),
    [100, 200, 400, 800, 1600, 2000, 2000],
    "full jitter: the whole step, never above the cap",
  );
  t.equal(
    backoffDelay(1e9, policy, () => 0.5),
    1500,
    "huge attempt numbers stay capped",
  );
  t.equal(
    backoffDelay(-3, policy, () => 0),
    50,
    "negative attempts are the first",
  );
});

/** A clock that only moves when someone sleeps on it. */
function fakeTime() {
  let now = 0;
  const sleeps: number[] = [];
  return {
    now: () => now,
    sleep: async (ms: number) => {
      sleeps.push(ms);
      now += ms;
    },
    sleeps,
  };
}

const transient = () => new StoreUnavailableError("connection dropped");
const deadlineError = (last: unknown) => new StoreUnavailableError(`deadline passed after: ${(last as Error | undefined)?.message}`);

t.test("retryWithin: retries transient failures with backoff until success", async (t) => {
  const time = fakeTime();
  let calls = 0;
  const result = await retryWithin(
    async () => {
      calls++;
      if (calls < 4) throw transient();
      return "written";
    },
    { deadlineMs: 10_000, policy, isTransient: (e) => e instanceof StoreUnavailableError, deadlineError, now: time.now, sleep: time.sleep, random: () => 0 },
  );
  t.equal(result, "written");
  t.equal(calls, 4);
  t.same(time.sleeps, [50, 100, 200], "backoff between tries");
});

t.test("retryWithin: a conflict is thrown at once, never retried", async (t) => {
  const time = fakeTime();
  let calls = 0;
  const conflict = new WrongExpectedVersionError("s", 1n, 2n);
  await t.rejects(
    retryWithin(
      async () => {
        calls++;
        throw conflict;
      },
      { deadlineMs: 10_000, policy, isTransient: (e) => e instanceof StoreUnavailableError, deadlineError, now: time.now, sleep: time.sleep },
    ),
    conflict,
  );
  t.equal(calls, 1);
  t.same(time.sleeps, []);
});

t.test("retryWithin: gives up at the deadline with the deadline error (the last failure named)", async (t) => {
  const time = fakeTime();
  let calls = 0;
  const error = await retryWithin(
    async () => {
      calls++;
      throw transient();
    },
    { deadlineMs: 1_000, policy, isTransient: (e) => e instanceof StoreUnavailableError, deadlineError, now: time.now, sleep: time.sleep, random: () => 1 },
  ).catch((e: unknown) => e);
  t.ok(error instanceof StoreUnavailableError);
  t.match((error as Error).message, /deadline passed after: connection dropped/);
  t.ok(time.now() <= 1_000, `no sleep beyond the deadline (t = ${time.now()})`);
  t.same(time.sleeps, [100, 200, 400, 300], "the last wait is cut to the deadline");
  t.equal(calls, 4);
});

t.test("retryWithin: an attempt that hangs is abandoned at the deadline", async (t) => {
  const started = Date.now();
  const error = await retryWithin(() => new Promise<never>(() => undefined), {
    deadlineMs: 200,
    policy,
    isTransient: () => true,
    deadlineError,
  }).catch((e: unknown) => e);
  t.ok(error instanceof StoreUnavailableError, "the deadline error");
  t.ok(Date.now() - started < 1_000, `answered after ${Date.now() - started} ms`);
});

t.test("retryWithin: stops retrying when told to (the store closes)", async (t) => {
  const time = fakeTime();
  let calls = 0;
  await t.rejects(
    retryWithin(
      async () => {
        calls++;
        throw transient();
      },
      { deadlineMs: 10_000, policy, isTransient: () => true, shouldStop: () => calls >= 2, deadlineError, now: time.now, sleep: time.sleep },
    ),
    StoreUnavailableError,
  );
  t.equal(calls, 2);
});

t.test("not-leader and connectivity answers are transient (StoreUnavailableError); others are not", async (t) => {
  const cs = "esdb://admin:changeit@a:2113,b:2113?nodePreference=leader";
  for (const type of ["unavailable", "deadline-exceeded", "cancelled", "not-leader"]) {
    const mapped = toStoreUnavailable({ type, message: `${type} happened` }, cs);
    t.ok(mapped instanceof StoreUnavailableError, type);
    t.notMatch(mapped?.message ?? "", "changeit", "no password");
  }
  for (const type of ["wrong-expected-version", "access-denied", "invalid-argument", "stream-deleted"]) {
    t.equal(toStoreUnavailable({ type, message: type }, cs), undefined, `${type} is not transient`);
  }
});

t.test("LogHealth: connection state, reconnects, the verdict /ok gives", async (t) => {
  const health = new LogHealth();
  t.same(health.verdict(), { ok: true });
  const sub = health.subscription("read-models");
  const sse = health.subscription(undefined);
  sub.state = "live";
  t.same(health.verdict(), { ok: true });

  health.unreachable(new Error("read ECONNRESET"));
  health.unreachable(new Error("connect ECONNREFUSED"));
  t.equal(health.state, "disconnected");
  t.match(health.verdict(), { ok: false, reason: /event log unreachable since .*ECONNREFUSED/ });
  health.reached();
  health.reached();
  t.equal(health.reconnects, 1, "one outage, one reconnect");
  t.same(health.verdict(), { ok: true });

  sub.state = "reconnecting";
  sub.lastError = "Connection dropped";
  t.match(health.verdict(), { ok: false, reason: "subscription read-models is reconnecting: Connection dropped" }, "a named subscription that is not live");
  sub.state = "live";
  sse.state = "reconnecting";
  t.same(health.verdict(), { ok: true }, "an SSE tail (unnamed) does not decide");

  health.consumerStopped("read-models", new Error("projection threw"));
  t.match(health.verdict(), { ok: false, reason: "read-models stopped: projection threw" });
  health.consumerRunning("read-models");
  t.same(health.verdict(), { ok: true });

  const snapshot = health.snapshot();
  t.equal(snapshot.subscriptions.length, 1);
  t.equal(snapshot.unnamedSubscriptions, 1);
  sse.closed();
  sub.closed();
  t.equal(health.snapshot().subscriptions.length + health.snapshot().unnamedSubscriptions, 0, "closed subscriptions are forgotten");
});

t.test("subscription lag: 0 when live with nothing waiting, else head − cursor", async (t) => {
  t.equal(subscriptionLag({ state: "live", position: 10n, buffered: 0 }, 50n), 0n);
  t.equal(subscriptionLag({ state: "live", position: 10n, buffered: 3 }, 50n), 40n);
  t.equal(subscriptionLag({ state: "reconnecting", position: 10n, buffered: 0 }, 50n), 40n);
  t.equal(subscriptionLag({ state: "catching_up", position: undefined, buffered: 0 }, 50n), 51n);
  t.equal(subscriptionLag({ state: "reconnecting", position: 60n, buffered: 0 }, 50n), 0n);
});

t.test("/ok: the verdict first, then the round trip when check_db asks for it", async (t) => {
  t.equal(wantsLogCheck(undefined), false);
  for (const off of ["", "0", "false", "False"]) t.equal(wantsLogCheck(off), false, `check_db=${off}`);
  for (const on of ["1", "true", "yes"]) t.equal(wantsLogCheck(on), true, `check_db=${on}`);
  const health = new LogHealth();
  let trips = 0;
  const ok = async () => void trips++;
  t.same(await okAnswer(health, undefined, ok), { ok: true });
  t.equal(trips, 0, "no round trip unless asked");
  t.same(await okAnswer(health, "1", ok), { ok: true });
  t.equal(trips, 1);
  t.match(await okAnswer(health, "1", async () => Promise.reject(new Error("no answer"))), { ok: false, reason: "event log round trip failed: no answer" });
  health.unreachable(new Error("gone"));
  t.match(await okAnswer(health, "1", ok), { ok: false, reason: /unreachable.*gone/ });
  t.equal(trips, 1, "no round trip when already known to be down");
});

t.test("a wait for a read-model position: bounded while the log is down, patient while it is up", async (t) => {
  const health = new LogHealth();
  let resolveLate!: () => void;
  const late = new Promise<void>((resolve) => (resolveLate = resolve));
  // Healthy: a deadline passing starts another (load is not an outage).
  const patient = positionWaitDeadline(late, 5n, health, 50);
  await new Promise((resolve) => setTimeout(resolve, 150));
  resolveLate();
  await t.resolves(patient, "resolved after several deadlines while healthy");

  health.unreachable(new Error("gone"));
  const started = Date.now();
  // The deadline's timer does not keep a process alive by itself (a request's socket does): this test's interval does.
  const keepAlive = setInterval(() => undefined, 20);
  t.teardown(() => clearInterval(keepAlive));
  const error = await positionWaitDeadline(new Promise<void>(() => undefined), 7n, health, 100).catch((e: unknown) => e);
  t.ok(error instanceof StoreUnavailableError, "503 material");
  t.match((error as Error).message, /position 7 within 100 ms: event log unreachable/);
  t.ok(Date.now() - started < 1_000);
});

t.test("EventStoreDB appends: a transient failure is retried with the same event ids (written once); a conflict is not retried", async (t) => {
  let failures = 0;
  let attempts = 0;
  // Append (not BatchAppend): the double reports an injected failure as UNAVAILABLE, as a dropped connection is.
  const double = await startEsdbTestDouble({
    batchAppend: false,
    beforeAppend: (stream) => {
      if (!stream.startsWith("retry-")) return;
      attempts++;
      if (failures > 0) {
        failures--;
        throw new Error("connection lost mid-write");
      }
    },
  });
  t.teardown(() => double.close());
  const health = new LogHealth();
  const store = await openEsdbStore({ connectionString: double.connectionString, health, deadlineMs: 5_000 });
  t.teardown(() => store.close());

  const stream = `retry-${randomUUID()}`;
  failures = 2;
  const id = randomUUID();
  const result = await store.append(stream, [{ id, type: "E", data: { n: 1 } }], "no_stream");
  t.equal(attempts, 3, "two failures, then written");
  t.equal(result.nextExpectedRevision, 0n);
  const events = await store.readStream(stream);
  t.same(
    events.map((e) => e.id),
    [id],
    "written once, with the id the writer chose",
  );
  t.equal(health.state, "connected");
  t.ok(health.reconnects >= 1, "the failures and the recovery were reported");

  attempts = 0;
  await t.rejects(store.append(stream, [{ type: "E", data: {} }], "no_stream"), WrongExpectedVersionError);
  t.equal(attempts, 1, "a conflict is answered once, not retried");

  attempts = 0;
  failures = 1_000;
  const started = Date.now();
  await t.rejects(store.append(stream, [{ type: "E", data: {} }]), StoreUnavailableError, "unavailable beyond the deadline");
  t.ok(Date.now() - started < 5_000 + 1_500, `gave up after ${Date.now() - started} ms (deadline 5000 ms)`);
  t.ok(attempts > 3, `retried ${attempts} times meanwhile`);
  // Read while the log still refuses appends: an attempt sent just before the deadline may reach the double
  // after the rejection (its outcome was unknown to the writer), and must not be let through by the test itself.
  t.equal((await store.readStream(stream)).length, 1, "nothing of the failed appends was written");
});
