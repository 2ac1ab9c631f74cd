import t, { type Test } from "tap";
import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { ANY, NO_STREAM, STREAM_EXISTS, EventStoreDBClient, WrongExpectedVersionError, jsonEvent, type AppendExpectedRevision } from "@eventstore/db-client";
import { Client } from "@langchain/langgraph-sdk";
import { openEsdbStore } from "../../src/eventstore/esdb.js";
import { openStore } from "../../src/eventstore/open.js";
import { fromClientPosition } from "../../src/eventstore/esdb-mapping.js";
import type { EventStore } from "../../src/eventstore/types.js";
import { runStream } from "../../src/domain/runs.js";
import { startEsdbTestDouble, type EsdbTestDouble, type EsdbTestDoubleOptions } from "../support/esdb-test-double.js";
import { spawnServer } from "../support/process.js";
import { gates as makeGates } from "../support/gates.js";
import { firstEventOf } from "../support/log.js";
import { runLog, sseLines } from "../support/chaos.js";
import { TEST_GRAPHS } from "../support/server.js";

/**
 * EventStoreDB recognises a retried append by its event ids durably only when the append names an exact
 * expected revision (or no_stream). With expected any (or stream_exists) it only looks in a bounded cache
 * of recently written ids, which a restart empties: the retry of such an append whose answer was lost is
 * written again if the server restarted in between. The double does the same, and the server stays
 * exactly-once all the same: its adapter looks for an earlier attempt's events before trying such an
 * append again, and what it cannot find that way is idempotent where it is read.
 */

t.setTimeout(120_000);

async function tmpDir(t: Test): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "esdb-any-idempotency-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** A double whose handle follows its restarts (teardown closes the latest). */
async function double(t: Test, options: EsdbTestDoubleOptions = {}): Promise<{ d: EsdbTestDouble; restart(): Promise<EsdbTestDouble> }> {
  const holder = { d: await startEsdbTestDouble(options) };
  t.teardown(() => holder.d.close());
  return {
    get d() {
      return holder.d;
    },
    async restart() {
      holder.d = await holder.d.restart();
      return holder.d;
    },
  };
}

function client(t: Test, connectionString: string): EventStoreDBClient {
  const c = EventStoreDBClient.connectionString(connectionString);
  t.teardown(() => c.dispose());
  return c;
}

async function adapter(t: Test, connectionString: string): Promise<EventStore> {
  const store = await openEsdbStore({ connectionString });
  t.teardown(() => store.close());
  return store;
}

const events = (ids: string[]) => ids.map((id, i) => jsonEvent({ id, type: "Thing", data: { i } }));

async function idsOf(c: EventStoreDBClient, stream: string): Promise<string[]> {
  const ids: string[] = [];
  for await (const e of c.readStream(stream)) ids.push(e.event!.id);
  return ids;
}

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

async function until(what: string, check: () => boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const PROTOCOLS = [
  ["BatchAppend", {}],
  ["Append", { batchAppend: false }],
] as const;

t.test("within one lifetime of the double, a retried any / stream_exists append is recognised by its ids", async (t) => {
  const { d } = await double(t);
  const c = client(t, d.connectionString);
  const ids = [randomUUID(), randomUUID()];
  const first = await c.appendToStream("recent-a", events(ids), { expectedRevision: ANY });
  t.equal(first.nextExpectedRevision, 1n);
  for (const expectedRevision of [ANY, STREAM_EXISTS] as AppendExpectedRevision[]) {
    const again = await c.appendToStream("recent-a", events(ids), { expectedRevision });
    t.equal(again.nextExpectedRevision, 1n, `${String(expectedRevision)}: answered with the revision of the events written before`);
  }
  t.same(await idsOf(c, "recent-a"), ids, "written once");
  t.equal(d.stats.idempotentAppends, 2, "both retries recognised");

  // Only the first id found is a new write that happens to repeat nothing; a later one missing is refused.
  const refused = await c.appendToStream("recent-a", events([ids[0], randomUUID()]), { expectedRevision: ANY }).catch((e: unknown) => e);
  t.ok(refused instanceof WrongExpectedVersionError, `a partial match is refused ("corrupted idempotency"): ${String(refused)}`);
  // The ids belong to their stream: the same ids in another stream are a new write.
  await c.appendToStream("recent-b", events(ids), { expectedRevision: ANY });
  t.same(await idsOf(c, "recent-b"), ids, "the same ids in another stream are written there");
});

t.test("the cache of recent ids is bounded: an append older than the window is written again", async (t) => {
  const { d } = await double(t, { idempotencyWindow: 3 });
  const c = client(t, d.connectionString);
  const ids = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
  for (const id of ids) await c.appendToStream("window-a", events([id]), { expectedRevision: ANY });
  await c.appendToStream("window-a", events([ids[3]]), { expectedRevision: ANY });
  t.equal((await idsOf(c, "window-a")).length, 4, "the latest append, still remembered, is recognised");
  await c.appendToStream("window-a", events([ids[0]]), { expectedRevision: ANY });
  t.same(await idsOf(c, "window-a"), [...ids, ids[0]], "the oldest, forgotten, is written again");
  // An exact expected revision does not depend on the window: the stream itself is looked at.
  const exact = await c.appendToStream("window-a", events([ids[1]]), { expectedRevision: 0n });
  t.equal(exact.nextExpectedRevision, 1n, "a retry with its exact expected revision is recognised however old");
  t.equal((await idsOf(c, "window-a")).length, 5);
});

t.test("a restart forgets the recent ids: an any append retried after it is written again; exact revisions are still recognised", async (t) => {
  const dataFile = path.join(await tmpDir(t), "log.jsonl");
  const h = await double(t, { dataFile });
  const c = client(t, h.d.connectionString);
  const ids = [randomUUID(), randomUUID()];
  await c.appendToStream("forget-any", events(ids), { expectedRevision: ANY });
  await c.appendToStream("forget-exists", events([ids[0]]), { expectedRevision: ANY });
  const exists = [randomUUID()];
  await c.appendToStream("forget-exists", events(exists), { expectedRevision: STREAM_EXISTS });
  const exact = [randomUUID(), randomUUID()];
  await c.appendToStream("forget-exact", events([exact[0]]), { expectedRevision: NO_STREAM });
  await c.appendToStream("forget-exact", events([exact[1]]), { expectedRevision: 0n });

  await h.restart();
  const again = await eventually(() => c.appendToStream("forget-any", events(ids), { expectedRevision: ANY }));
  t.equal(again.nextExpectedRevision, 3n, "any: the retry is a new write");
  t.same(await idsOf(c, "forget-any"), [...ids, ...ids], "the events are in the stream twice, as EventStoreDB would have them");
  await c.appendToStream("forget-exists", events(exists), { expectedRevision: STREAM_EXISTS });
  t.same(await idsOf(c, "forget-exists"), [ids[0], ...exists, ...exists], "stream_exists: likewise");

  t.equal((await c.appendToStream("forget-exact", events([exact[0]]), { expectedRevision: NO_STREAM })).nextExpectedRevision, 0n, "no_stream: recognised");
  t.equal((await c.appendToStream("forget-exact", events([exact[1]]), { expectedRevision: 0n })).nextExpectedRevision, 1n, "exact revision: recognised");
  t.same(await idsOf(c, "forget-exact"), exact, "written once");
  t.equal(h.d.stats.idempotentAppends, 2, "only the exact-revision retries were recognised");
});

for (const [protocol, options] of PROTOCOLS) {
  t.test(`${protocol}: an ambiguous any append, then a crash and a restart before the retry`, async (t) => {
    const dataFile = path.join(await tmpDir(t), "log.jsonl");
    const h = await double(t, { ...options, dataFile });
    const c = client(t, h.d.connectionString);

    // A client that simply retries with the same ids (what EventStoreDB's idempotency is for) gets the events twice.
    const ids = [randomUUID(), randomUUID()];
    h.d.failAppendsAfterApplying(1, "crash");
    const lost = await c.appendToStream("crash-raw", events(ids), { expectedRevision: ANY }).catch((e: unknown) => e);
    t.ok(lost instanceof Error, `the answer is lost: ${String(lost)}`);
    t.equal(h.d.stats.ambiguousAppends, 1, "the append was applied");
    const refused = await c.appendToStream("crash-raw", events(ids), { expectedRevision: ANY }).catch((e: unknown) => e);
    t.ok(refused instanceof Error, "the crashed double takes no call until it is restarted");
    await h.restart();
    await eventually(() => c.appendToStream("crash-raw", events(ids), { expectedRevision: ANY }));
    t.same(await idsOf(c, "crash-raw"), [...ids, ...ids], "the retry after the restart was written again");

    // Our adapter, the same append: it looks for the earlier attempt's events before sending it again.
    for (const expected of ["any", "stream_exists"] as const) {
      const stream = `crash-adapter-${expected}`;
      const store = await adapter(t, h.d.connectionString);
      await store.append(stream, [{ type: "Before", data: {} }]);
      const mine = [randomUUID(), randomUUID()];
      h.d.failAppendsAfterApplying(1, "crash", (s) => s === stream);
      const appending = store.append(
        stream,
        mine.map((id, i) => ({ id, type: "Mine", data: { i } })),
        expected,
      );
      await until("the ambiguous append", () => h.d.stats.ambiguousAppends === 1);
      const crashed = h.d;
      await h.restart();
      const result = await appending;
      t.equal(result.nextExpectedRevision, 2n, `${expected}: the append succeeds, at the revision its events were written at`);
      const stored = await store.readStream(stream);
      t.same(
        stored.map((e) => e.id),
        [stored[0].id, ...mine],
        `${expected}: its events are in the stream once`,
      );
      t.equal(result.position, stored[2].position, `${expected}: with the position of its last event`);
      t.equal(crashed.stats.ambiguousAppends, 1);
      t.equal(h.d.stats.idempotentAppends, 0, `${expected}: the restarted double was not asked again (it would have written them again)`);
      await store.close();
    }
  });
}

t.test("within one lifetime, the adapter's retry of an ambiguous any append leaves one copy", async (t) => {
  for (const [protocol, options] of PROTOCOLS) {
    for (const how of ["timeout", "drop"] as const) {
      const { d } = await double(t, options);
      const store = await adapter(t, d.connectionString);
      const ids = [randomUUID(), randomUUID()];
      d.failAppendsAfterApplying(1, how);
      const result = await store.append(
        "ambiguous-any",
        ids.map((id) => ({ id, type: "Mine", data: {} })),
        "any",
      );
      t.equal(result.nextExpectedRevision, 1n, `${protocol}, ${how}: succeeds`);
      t.same(
        (await store.readStream("ambiguous-any")).map((e) => e.id),
        ids,
        `${protocol}, ${how}: once`,
      );
      t.equal(d.stats.ambiguousAppends, 1);
      await d.close();
    }
  }
});

t.test("positions: commit is what orders events; the double reports self-committed events with commit === prepare", async (t) => {
  t.equal(fromClientPosition({ commit: 2048n, prepare: 1024n }), 2048n, "the adapter reads the commit position, whatever the prepare position");
  const { d } = await double(t);
  const c = client(t, d.connectionString);
  await c.appendToStream("positions-a", events([randomUUID(), randomUUID()]), { expectedRevision: ANY });
  for await (const e of c.readAll({ maxCount: 100 })) {
    const p = e.event?.position;
    if (!p) continue;
    t.equal(p.commit, p.prepare, `${e.event!.streamId}@${e.event!.revision}: as EventStoreDB reports an event written through gRPC`);
  }
});

t.test("the server, through an ambiguous any append of a run's outputs and a restart of EventStoreDB before the retry", async (t) => {
  const dir = await tmpDir(t);
  const h = await double(t, { dataFile: path.join(dir, "esdb.jsonl") });
  const proc = await spawnServer({
    EVENTSTORE_URL: h.d.connectionString,
    LANGGRAPH_JSON: TEST_GRAPHS,
    DATA_DIR: path.join(dir, "server"),
  });
  t.teardown(async () => {
    if (proc.child.exitCode === null && proc.child.signalCode === null) proc.child.kill("SIGTERM");
    await proc.exited;
  });
  t.ok(proc.url, `server started ${proc.stderr}`);
  const api = new Client({ apiUrl: proc.url! });
  const log = await openStore({ dataDir: "", eventstoreUrl: h.d.connectionString });
  t.teardown(() => log.close());

  const gates = makeGates(t);
  const start = async (gate: string) => {
    const thread = await api.threads.create();
    const run = await api.runs.create(thread.thread_id, "delay", {
      input: { gate: gates.path(gate), messages: [{ role: "user", content: "hello" }] },
      streamMode: ["values", "updates"],
    });
    return { thread, run };
  };
  // The same run without a fault: what each of the checks below must find.
  const control = await start("control");
  gates.open("control");
  await api.runs.join(control.thread.thread_id, control.run.run_id);
  const expectedOutputs = (await runLog(log, control.run.run_id)).outputs.map((line) => line.split(" ")[1]);
  t.ok(expectedOutputs.length >= 3, `the control run's outputs: ${expectedOutputs.join(", ")}`);

  // The next append of nothing but a run's outputs (the run stream writer's, expected any: the run's
  // first values, written while the run waits at its gate) is applied, and EventStoreDB dies before
  // answering it; it comes back on the same data, remembering no recent ids, before the retry.
  h.d.failAppendsAfterApplying(1, "crash", (stream, types) => stream.startsWith(runStream("")) && types.every((type) => type === "RunOutput"));
  // (Not awaited first: the request may need the log, which is down from the crash to the restart.)
  const starting = start("g");
  await until("the ambiguous append", () => h.d.stats.ambiguousAppends === 1, 30_000);
  await h.restart();
  const { thread, run } = await starting;
  gates.open("g");

  const ended = await firstEventOf(log, runStream(run.run_id), ["RunEnded"]);
  t.equal((ended.data as { status: string }).status, "success", "the run ended, with success");
  const events = await log.readStream(runStream(run.run_id));
  const ids = events.map((e) => e.id);
  t.equal(new Set(ids).size, ids.length, "no event of the run stream is in the log twice");
  const runRecord = await runLog(log, run.run_id);
  t.same([runRecord.claims, runRecord.starts, runRecord.ends], [1, 1, 1], "claimed, started and ended once");
  t.same(
    runRecord.outputs.map((line) => line.split(" ")[1]),
    expectedOutputs,
    "each output once, in order",
  );

  // What a client sees: the run's stream, its result, the thread's state and history.
  const lines = await sseLines(api, thread.thread_id, run.run_id);
  t.same(
    lines.map((line) => line.split(" ")[1]),
    expectedOutputs,
    "the joined stream has each output once",
  );
  t.equal(new Set(lines.map((line) => line.split(" ")[0])).size, lines.length, "under distinct ids");
  const joined = (await api.runs.join(thread.thread_id, run.run_id)) as { messages: { type: string }[] };
  t.same(
    joined.messages.map((m) => m.type),
    ["human", "ai"],
    "the run's result: one reply",
  );
  const state = await api.threads.getState(thread.thread_id);
  t.equal((state.values as { messages: unknown[] }).messages.length, 2, "the thread's state: one reply");
  const threadNow = await api.threads.get(thread.thread_id);
  t.equal(threadNow.status, "idle", "the thread is idle again");
});
