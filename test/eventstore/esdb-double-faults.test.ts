import t, { type Test } from "tap";
import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { createRequire } from "node:module";
import * as grpc from "@grpc/grpc-js";
import {
  EventStoreDBClient,
  jsonEvent,
  NotLeaderError,
  StreamNotFoundError,
  UnavailableError,
  DeadlineExceededError,
  AccessDeniedError,
  START,
} from "@eventstore/db-client";
import { openEsdbStore } from "../../src/eventstore/esdb.js";
import { openStore } from "../../src/eventstore/open.js";
import { toEsdbClientConnectionString } from "../../src/eventstore/connection-string.js";
import { StoreUnavailableError, type EventStore, type RecordedEvent } from "../../src/eventstore/types.js";
import { loadConfig } from "../../src/config.js";
import Database from "better-sqlite3";
import { PurgedContent, purgedOwnerOf } from "../../src/read-models/purged-content.js";
import { startEsdbTestDouble, type EsdbTestDouble, type EsdbTestDoubleOptions } from "../support/esdb-test-double.js";
import { generateTestCertificates } from "../support/test-certificates.js";
import { repoRoot, startTestServer, TEST_GRAPHS } from "../support/server.js";

/**
 * The EventStoreDB test double behaves like the real server where our correctness depends on it:
 * it keeps its log across a restart, faults can be injected (cut, refuse, NotLeader, delay,
 * ambiguous append), a delete is soft until a scavenge, and it serves TLS with credentials. Then
 * what the server makes of it: a purge is not resurrected by a rebuild or a replay, TLS and
 * `kurrentdb://` connection strings work end to end.
 */

async function tmpDir(t: Test, prefix: string): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), prefix));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

async function double(t: Test, options?: EsdbTestDoubleOptions): Promise<EsdbTestDouble> {
  const d = await startEsdbTestDouble(options);
  t.teardown(() => d.close());
  return d;
}

async function adapter(t: Test, connectionString: string): Promise<EventStore> {
  const store = await openEsdbStore({ connectionString });
  t.teardown(() => store.close());
  return store;
}

function client(t: Test, connectionString: string): EventStoreDBClient {
  const c = EventStoreDBClient.connectionString(connectionString);
  t.teardown(() => c.dispose());
  return c;
}

const ev = (type: string, data: Record<string, unknown>, id?: string) => ({ type, data, ...(id ? { id } : {}) });

/** Repeats `attempt` until it resolves (a reconnecting client's first calls may still fail), up to a deadline. */
async function eventually<T>(attempt: () => Promise<T>, ms = 5000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      return await attempt();
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected a rejection");
}

const dataOf = (events: RecordedEvent[]) => events.map((e) => e.data);

t.test("file-backed mode: a restart on the same port and file continues the same log", async (t) => {
  const dir = await tmpDir(t, "esdb-double-file-");
  const dataFile = path.join(dir, "log.jsonl");
  const first = await startEsdbTestDouble({ dataFile });
  const store1 = await openEsdbStore({ connectionString: first.connectionString });
  const a = await store1.append("restart-a", [ev("One", { n: 1 }), ev("Two", { n: 2 })]);
  await store1.append("restart-gone", [ev("Secret", { words: "gone after delete" })]);
  await store1.purgeStreams(["restart-gone"]);
  // A client that stays connected to the same connection string across the restart.
  const raw = client(t, first.connectionString);
  await raw.appendToStream("restart-raw", jsonEvent({ type: "Before", data: {} }));
  const before = await store1.readAll();
  await store1.close();
  await first.stop();
  t.ok(await rejection(raw.appendToStream("restart-raw", jsonEvent({ type: "While", data: {} }))), "stopped: the call fails");

  const second = await startEsdbTestDouble({ dataFile, port: first.port });
  t.teardown(() => second.close());
  t.equal(second.port, first.port, "same port");
  t.equal(second.connectionString, first.connectionString, "same connection string");
  // The first call of a client after a restart may still meet the old connection: retried, as a server does.
  const store2 = await eventually(() => adapter(t, second.connectionString));
  const after = await store2.readAll();
  t.same(
    after.map((e) => [e.streamId, e.revision, e.position, e.id]),
    before.map((e) => [e.streamId, e.revision, e.position, e.id]),
    "same events, positions, revisions and ids",
  );
  t.same(dataOf(await store2.readStream("restart-gone")), [], "a soft delete survives the restart");
  const next = await store2.append("restart-a", [ev("Three", { n: 3 })], a.nextExpectedRevision);
  t.equal(next.nextExpectedRevision, 2n, "revisions go on");
  t.ok(next.position > before[before.length - 1].position, "positions go on increasing");
  const again = await store2.append("restart-a", [ev("Three", { n: 3 })], 1n).catch((e: unknown) => e);
  t.match(again, { name: "WrongExpectedVersionError" }, "the expected revision is checked against the restored stream");

  const resumed = await eventually(() => raw.appendToStream("restart-raw", jsonEvent({ type: "After", data: {} })));
  t.equal(resumed.nextExpectedRevision, 1n, "the same client carries on once the double is back");

  // restart(): the same in one call; the old handle is closed.
  const third = await second.restart();
  t.teardown(() => third.close());
  const store3 = await adapter(t, third.connectionString);
  t.same(
    (await store3.readStream("restart-a")).map((e) => e.type),
    ["One", "Two", "Three"],
  );
  const inMemory = await double(t);
  t.match(await rejection(inMemory.restart()), /file-backed/, "restart needs a data file");
});

t.test("cutConnections: open calls fail with UNAVAILABLE as on a dropped connection; the next calls reconnect", async (t) => {
  const d = await double(t);
  const raw = client(t, d.connectionString);
  await raw.appendToStream("cut-a", jsonEvent({ type: "One", data: {} }));
  const subscription = raw.subscribeToStream("cut-a", { fromRevision: START });
  const ended = new Promise<unknown>((resolve) => subscription.on("error", resolve));
  const first = await new Promise((resolve) => subscription.once("data", resolve));
  t.ok(first, "the subscription is live");
  const connections = d.stats.connections;
  t.ok(d.cutConnections() >= 1, "an open connection was cut");
  const error = await ended;
  t.ok(error instanceof UnavailableError, `the subscription fails as unavailable (${String(error)})`);
  t.equal(d.stats.cutConnections >= 1, true);
  const result = await eventually(() => raw.appendToStream("cut-a", jsonEvent({ type: "Two", data: {} })));
  t.equal(result.nextExpectedRevision, 1n, "a new connection serves the next call");
  t.ok(d.stats.connections > connections, "through a new TCP connection");
});

t.test("refuseConnections: nothing listens until heal()", async (t) => {
  const d = await double(t);
  const store = await adapter(t, d.connectionString);
  await store.append("refuse-a", [ev("One", {})]);
  await d.refuseConnections();
  const error = await rejection(store.append("refuse-a", [ev("Two", {})]));
  t.ok(error instanceof StoreUnavailableError, `refused: StoreUnavailableError (${String(error)})`);
  const again = await rejection(store.readStream("refuse-a"));
  t.ok(again instanceof StoreUnavailableError, "still refused");
  await d.heal();
  const result = await eventually(() => store.append("refuse-a", [ev("Two", {})]));
  t.equal(result.nextExpectedRevision, 1n, "served again after heal()");
});

t.test("answerNotLeader: NotLeaderError with the leader's endpoint, and the client's next call goes there", async (t) => {
  const leader = await double(t);
  const follower = await double(t);
  follower.answerNotLeader({ host: "127.0.0.1", port: leader.port });
  const raw = client(t, follower.connectionString);
  const error = await rejection(raw.appendToStream("leader-a", jsonEvent({ type: "One", data: {} })));
  t.ok(error instanceof NotLeaderError, `NotLeaderError (${String(error)})`);
  t.same((error as NotLeaderError).leader, { address: "127.0.0.1", port: leader.port }, "it names the leader");
  t.equal(follower.stats.notLeaderAnswers, 1);
  await raw.appendToStream("leader-a", jsonEvent({ type: "One", data: { on: "leader" } }));
  const onLeader = await adapter(t, leader.connectionString);
  t.same(dataOf(await onLeader.readStream("leader-a")), [{ on: "leader" }], "the retry went to the leader");
  // A new client (our adapter: its open reads $all) on the follower: refused, as unreachable, not as an unusable server.
  const onFollower = await rejection(adapter(t, follower.connectionString));
  t.ok(onFollower instanceof StoreUnavailableError, `the follower still answers NotLeader to a new client: StoreUnavailableError (${String(onFollower)})`);
  t.ok((onFollower as Error).cause instanceof NotLeaderError, "caused by the client's NotLeaderError");
  t.match((onFollower as Error).message, /^cannot reach EventStoreDB at .*: Leader info available$/, "mapped as a failure that goes away (not-leader)");
  await follower.heal();
  const healed = await adapter(t, follower.connectionString);
  t.same(dataOf(await healed.readStream("leader-a")), [], "healed: it serves its own (empty) log again");
});

t.test("delayResponses: a call held past the client's deadline fails with DEADLINE_EXCEEDED; heal() ends it", async (t) => {
  const d = await double(t);
  const connectionString = `${d.connectionString}&defaultDeadline=300`;
  const raw = client(t, connectionString);
  await raw.appendToStream("delay-a", jsonEvent({ type: "One", data: {} }));
  const store = await adapter(t, connectionString);
  d.delayResponses(60_000);
  const started = Date.now();
  // BatchAppend carries its deadline in the request: the server answers Timeout when it passes.
  const error = await rejection(raw.appendToStream("delay-a", jsonEvent({ type: "Two", data: {} })));
  t.ok(error instanceof DeadlineExceededError, `DeadlineExceededError (${String(error)})`);
  t.ok(Date.now() - started < 10_000, "at the client's deadline, not the double's delay");
  // Our adapter retries within its own deadline (the same event id every time), then gives up.
  const adapterEventId = randomUUID();
  const viaAdapter = await rejection(store.append("delay-a", [ev("Two", {}, adapterEventId)]));
  t.ok(viaAdapter instanceof StoreUnavailableError, `our adapter: StoreUnavailableError (${String(viaAdapter)})`);
  // A read (no deadline of the client's) waits until heal() releases it.
  const read = store.readStream("delay-a");
  t.ok(d.stats.delayedCalls >= 2, `the appends were held (${d.stats.delayedCalls})`);
  await d.heal();
  const healed = await read;
  t.same(healed[0].type, "One", "the held read is served once healed");
  // The raw client's append timed out on the server (its deadline travels with it): never applied.
  // An attempt of the adapter held past its deadline may still land (an ambiguous write), but once:
  // every retry carried the same event id.
  const twos = healed.filter((e) => e.type === "Two");
  t.ok(twos.length <= 1 && twos.every((e) => e.id === adapterEventId), "at most the adapter's own event, once");
  const last = BigInt(healed.length - 1);
  const next = await store.append("delay-a", [ev("Three", {})], last);
  t.equal(next.nextExpectedRevision, last + 1n, "served at once after heal()");
});

for (const [mode, options, how] of [
  ["BatchAppend, commit timeout", {}, "timeout"],
  ["Append, connection dropped", { batchAppend: false }, "drop"],
] as const) {
  t.test(
    `failAppendsAfterApplying (${mode}): the events are stored, the client gets an error, our adapter's retry with the same ids is idempotent`,
    async (t) => {
      const d = await double(t, options);
      const store = await adapter(t, d.connectionString);
      await store.append("ambiguous-a", [ev("Zero", {})]);
      d.failAppendsAfterApplying(1, how);
      const ids = [randomUUID(), randomUUID()];
      // Our adapter takes the failure as transient and retries with the same ids: the store answers
      // the retry from the events it had already applied.
      const first = await store.append("ambiguous-a", [ev("One", { n: 1 }, ids[0]), ev("Two", { n: 2 }, ids[1])], 0n);
      t.equal(first.nextExpectedRevision, 2n, "the append succeeds through the adapter's retry");
      t.equal(d.stats.ambiguousAppends, 1, "the first attempt was applied and answered with an error");
      const stored = await eventually(() => store.readStream("ambiguous-a"));
      t.same(stored.map((e) => e.id).slice(1), ids, "the events are in the log");
      const retried = await eventually(() => store.append("ambiguous-a", [ev("One", { n: 1 }, ids[0]), ev("Two", { n: 2 }, ids[1])], 0n));
      t.equal(retried.nextExpectedRevision, 2n, "a further retry succeeds without writing again");
      t.equal((await store.readStream("ambiguous-a")).length, 3, "no duplicate");
      const next = await store.append("ambiguous-a", [ev("Three", {})], 2n);
      t.equal(next.nextExpectedRevision, 3n, "only one append was failed");
    },
  );
}

t.test("soft delete: gone from stream reads, still in $all and $all subscriptions until a scavenge", async (t) => {
  const dir = await tmpDir(t, "esdb-double-scavenge-");
  const dataFile = path.join(dir, "log.jsonl");
  const d = await double(t, { dataFile });
  const store = await adapter(t, d.connectionString);
  const raw = client(t, d.connectionString);
  const marker = `marker-${randomUUID()}`;
  await store.append("soft-gone", [ev("Secret", { marker }), ev("Secret", { marker, n: 2 })]);
  await store.append("soft-kept", [ev("Public", { n: 1 })]);
  await store.purgeStreams(["soft-gone"]);

  t.same(await store.readStream("soft-gone"), [], "the adapter reads the stream as empty");
  const notFound = await rejection(
    (async () => {
      for await (const _ of raw.readStream("soft-gone")) void _;
    })(),
  );
  t.ok(notFound instanceof StreamNotFoundError, `the server answers StreamNotFound (${String(notFound)})`);
  const inAll = (events: RecordedEvent[]) => events.filter((e) => e.streamId === "soft-gone").length;
  t.equal(inAll(await store.readAll()), 2, "$all still holds the events");
  const sub = store.subscribeToAll({ fromPosition: "start" });
  const seen: RecordedEvent[] = [];
  for await (const item of sub) {
    if (item.kind === "caughtUp") break;
    seen.push(item.event);
  }
  await sub.close();
  t.equal(inAll(seen), 2, "and so does a subscription to $all");
  const metadata = await raw.getStreamMetadata("soft-gone");
  t.ok(metadata.metadata?.truncateBefore !== undefined, "the stream's metadata carries a truncate-before, as the server's soft delete writes it");
  t.ok(
    (await readFile(dataFile, "utf8")).includes(Buffer.from(JSON.stringify({ marker })).toString("base64").slice(0, 20)),
    "the file holds the events before the scavenge",
  );

  t.equal(d.scavenge(), 2, "a scavenge removes them");
  t.equal(inAll(await store.readAll()), 0, "gone from $all");
  const after = await store.append("soft-gone", [ev("Again", { n: 3 })], "any");
  t.equal(after.nextExpectedRevision, 2n, "a later append continues after the last revision");
  t.same(
    (await store.readStream("soft-gone")).map((e) => e.type),
    ["Again"],
  );
  t.same(dataOf(await store.readStream("soft-kept")), [{ n: 1 }], "other streams are untouched");
  t.notOk(
    (await readFile(dataFile, "utf8")).includes(Buffer.from(JSON.stringify({ marker })).toString("base64").slice(0, 20)),
    "the file no longer holds them",
  );

  // The same through the real Operations.StartScavenge call, after a restart of the file-backed double.
  await store.purgeStreams(["soft-kept"]);
  const restarted = await d.restart();
  t.teardown(() => restarted.close());
  const store2 = await adapter(t, restarted.connectionString);
  t.equal((await store2.readAll()).filter((e) => e.streamId === "soft-kept").length, 1, "a soft delete survives a restart: still in $all");
  const require = createRequire(import.meta.url);
  const generated = path.dirname(require.resolve("@eventstore/db-client/generated/operations_pb.js"));
  const pb = require(path.join(generated, "operations_pb.js")) as typeof import("@eventstore/db-client/generated/operations_pb.js");
  const grpcPb = require(path.join(generated, "operations_grpc_pb.js")) as {
    OperationsClient: new (
      address: string,
      credentials: grpc.ChannelCredentials,
    ) => grpc.Client & { startScavenge(req: unknown, cb: (e: grpc.ServiceError | null, r: InstanceType<typeof pb.ScavengeResp>) => void): void };
  };
  const operations = new grpcPb.OperationsClient(`127.0.0.1:${restarted.port}`, grpc.credentials.createInsecure());
  t.teardown(() => operations.close());
  const request = new pb.StartScavengeReq();
  const options = new pb.StartScavengeReq.Options();
  options.setThreadCount(1);
  options.setStartFromChunk(0);
  request.setOptions(options);
  const response = await new Promise<InstanceType<typeof pb.ScavengeResp>>((resolve, reject) =>
    operations.startScavenge(request, (e, r) => (e ? reject(e) : resolve(r))),
  );
  t.equal(response.getScavengeResult(), pb.ScavengeResp.ScavengeResult.STARTED);
  t.equal((await store2.readAll()).filter((e) => e.streamId === "soft-kept").length, 0, "Operations.StartScavenge scavenged");
});

t.test("TLS with a generated CA, and basic-auth credentials", async (t) => {
  const certificates = await generateTestCertificates();
  t.teardown(() => certificates.remove());
  const d = await double(t, { tls: certificates, credentials: { username: "admin", password: "changeit" } });
  t.match(d.connectionString, /^esdb:\/\/admin:changeit@127\.0\.0\.1:\d+\?tls=true&tlsCAFile=/);
  const store = await adapter(t, d.connectionString);
  await store.append("tls-a", [ev("One", { n: 1 })]);
  t.same(dataOf(await store.readStream("tls-a")), [{ n: 1 }], "served over TLS with the right credentials");

  const wrong = await rejection(openEsdbStore({ connectionString: d.connectionString.replace("changeit", "wrong") }));
  t.match(String(wrong), /EventStoreDB/, `wrong credentials fail at open (${String(wrong)})`);
  t.ok(
    (wrong as { cause?: unknown }).cause instanceof AccessDeniedError || String(wrong).match(/denied|credentials|password|unauthenticated/i),
    "as access denied",
  );
  const anonymous = await rejection(openEsdbStore({ connectionString: d.connectionString.replace("admin:changeit@", "") }));
  t.ok(anonymous instanceof Error, "no credentials: refused too");
  const untrusted = await rejection(openEsdbStore({ connectionString: d.connectionString.replace(/&tlsCAFile=[^&]*/, "") }));
  t.ok(untrusted instanceof StoreUnavailableError, "a client that does not trust the CA cannot connect");
  t.ok(d.stats.deniedCalls >= 2, "the double counted the refusals");
});

t.test("connection strings: esdb://, kurrentdb://, kurrent://, kdb:// (+discover) are accepted", async (t) => {
  for (const scheme of ["esdb", "kurrentdb", "kurrent", "kdb", "KurrentDB"]) {
    t.equal(toEsdbClientConnectionString(`${scheme}://127.0.0.1:2113?tls=false`), "esdb://127.0.0.1:2113?tls=false", scheme);
    t.equal(toEsdbClientConnectionString(`${scheme}+discover://a:1,b:2`), "esdb+discover://a:1,b:2", `${scheme}+discover`);
    t.equal(loadConfig({ EVENTSTORE_URL: `${scheme}://admin:changeit@127.0.0.1:2113` }).eventstoreUrl, `${scheme}://admin:changeit@127.0.0.1:2113`);
  }
  t.throws(() => loadConfig({ EVENTSTORE_URL: "http://127.0.0.1:2113" }), /EVENTSTORE_URL|esdb/, "another scheme is refused at start");
  const d = await double(t);
  const store = await openStore({ dataDir: "unused", eventstoreUrl: d.connectionString.replace("esdb://", "kurrentdb://") });
  t.teardown(() => store.close());
  t.equal(store.kind, "esdb", "kurrentdb:// opens the EventStoreDB adapter");
  await store.append("kurrent-a", [ev("One", {})]);
  t.equal((await store.readStream("kurrent-a")).length, 1);
});

// -------------------------------------------------------------------------------------------------- the server

const human = (content: string) => ({ role: "user", content });

t.test("the server over TLS with credentials (EVENTSTORE_URL esdb://admin:changeit@…?tls=true&tlsCAFile=…), and through kurrentdb://", async (t) => {
  const certificates = await generateTestCertificates();
  t.teardown(() => certificates.remove());
  const d = await double(t, { tls: certificates, credentials: { username: "admin", password: "changeit" } });
  for (const url of [d.connectionString, d.connectionString.replace("esdb://", "kurrentdb://")]) {
    const srv = await startTestServer({ env: { EVENTSTORE_URL: url } });
    t.teardown(() => srv.close());
    const thread = await srv.client.threads.create();
    const values = (await srv.client.runs.wait(thread.thread_id, "agent", { input: { messages: [human("over tls")] } })) as { messages: { content: string }[] };
    t.ok(
      values.messages.some((m) => m.content === "over tls"),
      `a thread and a run through ${url.split(":")[0]}://`,
    );
    await srv.close();
  }
  const wrong = await rejection(startTestServer({ env: { EVENTSTORE_URL: d.connectionString.replace("changeit", "wrong") } }));
  t.match(String(wrong), /EventStoreDB/, `wrong credentials: the server does not start, and says why (${String(wrong)})`);
});

t.test("purgedOwnerOf / PurgedContent: which events a later purge hides", async (t) => {
  const [thread, run, config] = [randomUUID(), randomUUID(), randomUUID()];
  for (const [stream, owner] of [
    [`thread-${thread}`, thread],
    [`checkpoints-${thread}`, thread],
    [`thread-values-${thread}`, thread],
    [`run-${run}`, run],
    [`run-values-${run}`, run],
    [`run-input-${run}`, run],
    [`run-output-${run}`, run],
    [`run-command-${run}`, run],
    [`webhook-${run}`, run],
    [`webhook-a2a-${run}-${config}`, run],
    [`a2a-push-${run}`, run],
    [`assistant-${thread}`, undefined],
    [`cron-${thread}`, undefined],
  ] as const)
    t.equal(purgedOwnerOf(stream), owner, stream);

  const db = new Database(":memory:");
  t.teardown(() => db.close());
  const purged = new PurgedContent(db);
  const event = (streamId: string, position: bigint) => ({
    streamId,
    position,
    id: randomUUID(),
    type: "X",
    revision: 0n,
    data: {},
    metadata: {},
    created: new Date(),
  });
  purged.record({ ...event(`thread-${thread}`, 100n), type: "ThreadPurged", data: { thread_id: thread, run_ids: [run] } });
  t.ok(purged.hides(event(`thread-${thread}`, 10n)), "the thread's events before the purge");
  t.ok(purged.hides(event(`run-output-${run}`, 99n)), "its runs' events before the purge");
  t.notOk(purged.hides(event(`thread-${thread}`, 100n)), "not the ThreadPurged record itself");
  t.notOk(purged.hides(event(`run-${run}`, 101n)), "nor what comes after it");
  t.notOk(purged.hides(event(`thread-${randomUUID()}`, 10n)), "nor other threads");
});

function replayCli(env: Record<string, string>, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ["--import", "tsx", "src/app/replay-cli.ts", ...args],
      { cwd: repoRoot, env: { ...process.env, LANGGRAPH_JSON: TEST_GRAPHS, ...env } },
      (error, stdout, stderr) => resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/** Every file of the directory (WAL included) that holds the text. */
async function filesHolding(dir: string, text: string): Promise<string[]> {
  const found: string[] = [];
  for (const name of await readdir(dir)) {
    const bytes = await readFile(path.join(dir, name)).catch(() => undefined);
    if (bytes?.includes(Buffer.from(text))) found.push(name);
  }
  return found;
}

t.test("a purge on EventStoreDB (soft delete, no scavenge yet) is not resurrected by a read-model rebuild or a replay", async (t) => {
  const d = await double(t);
  const srv = await startTestServer({ env: { EVENTSTORE_URL: d.connectionString } });
  t.teardown(() => srv.close());
  const metadataMarker = `meta-${randomUUID()}`;
  const inputMarker = `input-${randomUUID()}`;
  const tag = randomUUID();
  const purged = await srv.client.threads.create({ metadata: { tag, marker: metadataMarker } });
  const run = await srv.client.runs.wait(purged.thread_id, "agent", { input: { messages: [human(inputMarker)] } });
  t.ok(run);
  const kept = await srv.client.threads.create({ metadata: { tag } });
  await srv.client.runs.wait(kept.thread_id, "agent", { input: { messages: [human("keep me")] } });
  const runs = await srv.client.runs.list(purged.thread_id);
  t.equal(runs.length, 1);
  t.equal((await fetch(`${srv.url}/threads/${purged.thread_id}?purge=true`, { method: "DELETE" })).status, 204);

  // The soft-deleted events are still in the log's $all: this is what a rebuild reads.
  const raw = await adapter(t, d.connectionString);
  const all = JSON.stringify(dataOf(await raw.readAll()));
  t.ok(all.includes(metadataMarker) && all.includes(inputMarker), "before a scavenge, $all still holds the purged content");

  // A second process with an empty read-model database folds the log from position 0.
  const rebuilt = await startTestServer({ env: { EVENTSTORE_URL: d.connectionString } });
  t.teardown(() => rebuilt.close());
  for (const server of [srv, rebuilt]) {
    const where = server === srv ? "the purging process" : "a process rebuilt from position 0";
    t.equal((await fetch(`${server.url}/threads/${purged.thread_id}`)).status, 404, `${where}: the thread is gone`);
    t.equal((await fetch(`${server.url}/runs/${runs[0].run_id}`)).status, 404, `${where}: its run is gone`);
    t.equal((await fetch(`${server.url}/threads/${purged.thread_id}/runs/${runs[0].run_id}`)).status, 404, `${where}: its run is gone`);
    t.same(
      (await server.client.threads.search({ metadata: { tag } })).map((x) => x.thread_id),
      [kept.thread_id],
      `${where}: search finds only the kept thread`,
    );
    t.same(await server.client.threads.search({ metadata: { marker: metadataMarker } }), [], `${where}: nothing by the purged metadata`);
    const count = (await (
      await fetch(`${server.url}/threads/count`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ metadata: { tag } }),
      })
    ).json()) as number;
    t.equal(count, 1, `${where}: count agrees`);
    const replay = (await (await fetch(`${server.url}/threads/${purged.thread_id}/replay`)).json()) as {
      thread: { purged: boolean; metadata: unknown } | null;
      runs: unknown[];
    };
    t.match(replay, { thread: { purged: true, metadata: {} }, runs: [] }, `${where}: the replay shows a purged, empty thread`);
    t.notOk(JSON.stringify(replay).includes(metadataMarker) || JSON.stringify(replay).includes(inputMarker), `${where}: no purged content in the replay`);
  }
  t.match((await rebuilt.client.threads.get(kept.thread_id)).metadata, { tag }, "the kept thread is rebuilt");
  t.equal((await rebuilt.client.runs.list(kept.thread_id)).length, 1, "with its run");

  // The rebuilt process never wrote the purged content into its files.
  await rebuilt.server.close();
  t.same(await filesHolding(rebuilt.dataDir, metadataMarker), [], "no file of the rebuilt DATA_DIR holds the purged metadata");
  t.same(await filesHolding(rebuilt.dataDir, inputMarker), [], "nor the purged input");

  // `npm run replay` on the log: nothing of the purged thread comes back.
  const cli = await replayCli({ EVENTSTORE_URL: d.connectionString, DATA_DIR: rebuilt.dataDir }, ["--thread", purged.thread_id]);
  t.equal(cli.code, 0, cli.stderr);
  t.match(JSON.parse(cli.stdout), { thread_id: purged.thread_id, thread: { purged: true, metadata: {} }, runs: [] });
  t.notOk(cli.stdout.includes(metadataMarker) || cli.stdout.includes(inputMarker), "the CLI's replay holds no purged content");
});
