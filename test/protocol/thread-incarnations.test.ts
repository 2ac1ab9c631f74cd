import t from "tap";
import path from "node:path";
import { execFile } from "node:child_process";
import { rm } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { Client } from "@langchain/langgraph-sdk";
import { startTestServer, repoRoot, TEST_GRAPHS, type TestServer } from "../support/server.js";
import { startEsdbTestDouble } from "../support/esdb-test-double.js";
import { signToken } from "../auth/jwt.js";
import { feedThread } from "../../src/protocol/thread-feed.js";
import { seqOf } from "../../src/protocol/log-events.js";

/**
 * A deleted thread's id created again starts a new incarnation: its own owner, state, checkpoints
 * and runs. Through the real server and the official SDK, on the embedded log and on EventStoreDB
 * (the test double): auditors (/events, /replay) see only the incarnations their filters let them
 * see, each judged by its own metadata; the normal thread routes show the current incarnation only.
 */

const AUTH_PROJECT = path.join(path.join(path.dirname(fileURLToPath(import.meta.url)), ".."), "auth", "langgraph.json");
const ALL_SCOPES = ["threads:read", "threads:write", "assistants:read", "assistants:write"];
const human = (content: string) => ({ role: "user", content });

type AuditEvent = {
  position: string;
  stream: string;
  revision: string;
  type: string;
  incarnation: number;
  metadata: Record<string, unknown>;
  data: Record<string, unknown>;
};
type Replay = {
  thread_id: string;
  incarnation: number | null;
  at: { position: string };
  thread: { status: string; deleted: boolean; metadata: Record<string, unknown>; values: unknown } | undefined;
  runs: { run_id: string; status: string }[];
  incarnations: { incarnation: number; deleted: boolean; purged: boolean }[];
};

async function get<T>(url: string, token?: string): Promise<{ status: number; body: T }> {
  const res = await fetch(url, { headers: token ? { authorization: `Bearer ${token}` } : {} });
  return { status: res.status, body: (await res.json()) as T };
}

const texts = (values: unknown): string[] => ((values as { messages?: { content: string }[] } | null)?.messages ?? []).map((m) => m.content);

/** The backends the scenarios run on: the embedded SQLite log, and EventStoreDB (its in-process double). */
const backends: { name: string; env: () => Promise<{ env: Record<string, string>; close: () => Promise<void> }> }[] = [
  { name: "SQLite", env: async () => ({ env: {}, close: async () => undefined }) },
  {
    name: "EventStoreDB",
    env: async () => {
      const esdb = await startEsdbTestDouble();
      return { env: { EVENTSTORE_URL: esdb.connectionString }, close: () => esdb.close() };
    },
  },
];

for (const backend of backends) {
  t.test(`${backend.name}: owner isolation across incarnations of one thread id`, async (t) => {
    const log = await backend.env();
    t.teardown(log.close);
    const srv: TestServer = await startTestServer({ env: { LANGGRAPH_JSON: AUTH_PROJECT, ...log.env } });
    t.teardown(() => srv.close());
    const aliceToken = await signToken("alice", ALL_SCOPES);
    const bobToken = await signToken("bob", ALL_SCOPES);
    const carolToken = await signToken("carol", ALL_SCOPES);
    const alice = new Client({ apiUrl: srv.url, defaultHeaders: { authorization: `Bearer ${aliceToken}` } });
    const bob = new Client({ apiUrl: srv.url, defaultHeaders: { authorization: `Bearer ${bobToken}` } });
    const X = crypto.randomUUID();

    // Alice's thread X: a run, a checkpoint to remember, then deleted (not purged).
    await alice.threads.create({ threadId: X });
    await alice.runs.wait(X, "agent", { input: { messages: [human("alice secret")] } });
    const [aliceRun] = await alice.runs.list(X);
    const [aliceLatest] = await alice.threads.getHistory(X, { limit: 1 });
    const aliceCheckpoint = aliceLatest.checkpoint!.checkpoint_id!;
    await alice.threads.delete(X);

    // Bob creates X again (the official servers allow it) and runs on it.
    const created = await fetch(`${srv.url}/threads`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${bobToken}` },
      body: JSON.stringify({ thread_id: X }),
    });
    t.equal(created.status, 200, "a deleted thread's id can be created again");
    t.match(await created.json(), { thread_id: X, metadata: { owner: "bob" }, values: null, status: "idle" });
    await bob.runs.wait(X, "agent", { input: { messages: [human("bob words")] } });
    const [bobRun] = await bob.runs.list(X);

    t.test("alice's auditors see her incarnation only", async (t) => {
      const events = await get<AuditEvent[]>(`${srv.url}/threads/${X}/events?include_output=true&limit=1000`, aliceToken);
      t.equal(events.status, 200);
      const text = JSON.stringify(events.body);
      t.ok(text.includes("alice secret"));
      t.notOk(text.includes("bob words"), "none of bob's messages");
      t.notOk(text.includes(bobRun.run_id), "nor his run");
      t.ok(events.body.every((e) => e.incarnation === 1));
      t.equal(events.body[0].type, "ThreadCreated");
      t.match(events.body[0].data, { metadata: { owner: "alice" } });
      t.ok(events.body.some((e) => e.type === "ThreadDeleted"));

      const replay = await get<Replay>(`${srv.url}/threads/${X}/replay`, aliceToken);
      t.equal(replay.status, 200);
      t.equal(replay.body.incarnation, 1);
      t.match(replay.body.thread, { status: "deleted", metadata: {} });
      t.same(
        replay.body.runs.map((r) => r.run_id),
        [aliceRun.run_id],
        "her run only",
      );
      t.same(
        replay.body.incarnations.map((i) => i.incarnation),
        [1],
        "she is not told of bob's",
      );
      const finished = events.body.find((e) => e.type === "RunFinished")!;
      const then = await get<Replay>(`${srv.url}/threads/${X}/replay?at=${finished.position}`, aliceToken);
      t.same(texts(then.body.thread!.values), ["alice secret", "You said: alice secret"]);
      t.equal(then.body.thread!.metadata.owner, "alice");

      t.equal((await get(`${srv.url}/threads/${X}/events?incarnation=2`, aliceToken)).status, 404, "bob's incarnation is not hers");
      t.equal((await get(`${srv.url}/threads/${X}/replay?incarnation=2`, aliceToken)).status, 404);
      // The normal routes show the current incarnation: bob's.
      t.equal((await get(`${srv.url}/threads/${X}`, aliceToken)).status, 404);
      t.equal((await get(`${srv.url}/threads/${X}/state`, aliceToken)).status, 404);
      t.equal((await get(`${srv.url}/threads/${X}/history`, aliceToken)).status, 404);
      t.equal((await get(`${srv.url}/threads/${X}/state/${aliceCheckpoint}`, aliceToken)).status, 404);
    });

    t.test("bob's auditors see his incarnation only, and /events answers him", async (t) => {
      const events = await get<AuditEvent[]>(`${srv.url}/threads/${X}/events?include_output=true&limit=1000`, bobToken);
      t.equal(events.status, 200);
      const text = JSON.stringify(events.body);
      t.ok(text.includes("bob words"));
      t.notOk(text.includes("alice secret"), "none of alice's messages");
      t.notOk(text.includes(aliceRun.run_id), "nor her run");
      t.ok(events.body.every((e) => e.incarnation === 2));
      t.equal(events.body[0].type, "ThreadCreated");
      t.match(events.body[0].data, { metadata: { owner: "bob" } });
      t.notOk(events.body.some((e) => e.type === "ThreadDeleted"));

      const replay = await get<Replay>(`${srv.url}/threads/${X}/replay`, bobToken);
      t.equal(replay.status, 200);
      t.equal(replay.body.incarnation, 2);
      t.match(replay.body.thread, { status: "idle", metadata: { owner: "bob" } });
      t.same(texts(replay.body.thread!.values), ["bob words", "You said: bob words"]);
      t.same(
        replay.body.runs.map((r) => r.run_id),
        [bobRun.run_id],
      );
      t.same(
        replay.body.incarnations.map((i) => i.incarnation),
        [2],
      );
      // A point of the log before his thread existed: nothing of it (nor of alice's) to see.
      const before = await get<Replay>(`${srv.url}/threads/${X}/replay?at=${BigInt(events.body[0].position) - 1n}`, bobToken);
      t.equal(before.status, 200);
      t.equal(before.body.incarnation, null);
      t.equal(before.body.thread, undefined);
      t.same(before.body.runs, []);
      t.equal((await get(`${srv.url}/threads/${X}/events?incarnation=1`, bobToken)).status, 404, "alice's incarnation is not his");
    });

    t.test("bob's thread holds nothing of alice's: state, history, older checkpoints, runs", async (t) => {
      const state = await bob.threads.getState(X);
      t.same(texts(state.values), ["bob words", "You said: bob words"]);
      const history = await bob.threads.getHistory(X, { limit: 100 });
      t.ok(history.length > 0);
      t.notOk(JSON.stringify(history).includes("alice secret"), "no checkpoint of alice's in his history");
      t.same(await bob.threads.getHistory(X, { checkpoint: { checkpoint_id: aliceCheckpoint } }), [], "her checkpoint is not his");
      const old = await get<{ values: unknown; checkpoint: unknown }>(`${srv.url}/threads/${X}/state/${aliceCheckpoint}`, bobToken);
      t.notOk(JSON.stringify(old.body).includes("alice secret"), "the state at her checkpoint is not his to read");
      t.same(
        (await bob.runs.list(X)).map((r) => r.run_id),
        [bobRun.run_id],
        "his runs only",
      );
      t.equal((await get(`${srv.url}/threads/${X}/runs/${aliceRun.run_id}`, bobToken)).status, 404);
      const thread = await bob.threads.get(X);
      t.same(texts(thread.values), ["bob words", "You said: bob words"]);
    });

    t.test("the thread stream from the beginning starts at bob's incarnation", async (t) => {
      const abort = new AbortController();
      const seen: string[] = [];
      for await (const chunk of bob.threads.joinStream(X, { lastEventId: "-", streamMode: ["run_modes", "lifecycle"], signal: abort.signal })) {
        seen.push(JSON.stringify(chunk));
        if (chunk.event === "metadata" && (chunk.data as { status?: string; run_id?: string }).status === "run_done") break;
      }
      abort.abort();
      const text = seen.join("\n");
      t.ok(text.includes(bobRun.run_id), "his run");
      t.notOk(text.includes(aliceRun.run_id) || text.includes("alice secret"), "nothing of alice's");
    });

    t.test("a purge would remove both: refused to either of them", async (t) => {
      for (const token of [aliceToken, bobToken]) {
        const res = await fetch(`${srv.url}/threads/${X}?purge=true`, { method: "DELETE", headers: { authorization: `Bearer ${token}` } });
        t.equal(res.status, 409);
      }
      t.equal((await get(`${srv.url}/threads/${X}`, bobToken)).status, 200, "bob's thread is still there");
      const stranger = await signToken("mallory", ALL_SCOPES);
      const res = await fetch(`${srv.url}/threads/${X}?purge=true`, { method: "DELETE", headers: { authorization: `Bearer ${stranger}` } });
      t.equal(res.status, 404, "someone who may see neither: not found");
    });

    t.test("an incarnation is judged by its metadata as its later updates left it", async (t) => {
      // Bob hands his thread over to carol: its history is carol's to audit now, no longer his.
      await bob.threads.update(X, { metadata: { owner: "carol" } });
      t.equal((await get(`${srv.url}/threads/${X}/events`, bobToken)).status, 404);
      const carol = await get<AuditEvent[]>(`${srv.url}/threads/${X}/events?limit=1000&include_output=true`, carolToken);
      t.equal(carol.status, 200);
      t.ok(carol.body.every((e) => e.incarnation === 2));
      t.ok(JSON.stringify(carol.body).includes("bob words"));
      t.notOk(JSON.stringify(carol.body).includes("alice secret"));
      t.equal((await get(`${srv.url}/threads/${X}/events`, aliceToken)).status, 200, "alice still sees hers");
    });
  });

  t.test(`${backend.name}: without auth, a re-created id starts empty`, async (t) => {
    const log = await backend.env();
    t.teardown(log.close);
    const srv = await startTestServer({ env: log.env });
    t.teardown(() => srv.close());
    const { client, url } = srv;
    const X = crypto.randomUUID();
    await client.threads.create({ threadId: X, metadata: { first: true } });
    await client.runs.wait(X, "agent", { input: { messages: [human("first words")] } });
    const [firstRun] = await client.runs.list(X);
    await client.threads.delete(X);

    // The same id again, on the same graph: nothing of the first thread's state, history or runs.
    const again = await client.threads.create({ threadId: X, graphId: "agent" });
    t.same(again.values, null);
    t.same(again.metadata, { graph_id: "agent" }, "its own metadata only");
    const state = await client.threads.getState(X);
    t.same(state.values, {});
    t.equal(state.checkpoint, null);
    t.same(await client.threads.getHistory(X), []);
    t.same(await client.runs.list(X), []);
    t.equal((await fetch(`${url}/threads/${X}/runs/${firstRun.run_id}`)).status, 404);

    await client.runs.wait(X, "agent", { input: { messages: [human("second words")] } });
    t.same(texts((await client.threads.getState(X)).values), ["second words", "You said: second words"]);
    const history = await client.threads.getHistory(X, { limit: 100 });
    t.notOk(JSON.stringify(history).includes("first words"));
    const [secondRun] = await client.runs.list(X);
    t.same(
      (await client.runs.list(X)).map((r) => r.run_id),
      [secondRun.run_id],
    );

    // The protocol's thread feed (every run from the start): the current incarnation's runs only.
    const recreated = (await srv.server.store.readStream(`thread-${X}`)).filter((e) => e.type === "ThreadCreated").pop()!;
    const abort = new AbortController();
    const fed: { seq: number; method: string; params: { data: unknown } }[] = [];
    await feedThread(srv.server.store, X, 0, abort.signal, (event) => {
      fed.push(event);
      if (event.method === "lifecycle" && (event.params.data as { event?: string }).event === "completed") abort.abort();
    });
    t.ok(fed.length > 0 && fed.every((e) => e.seq > seqOf(recreated.position, 0)), "every event of the feed comes after the id was created again");

    // An operator (no filters) sees both incarnations, each event labelled with its own.
    const events = await get<AuditEvent[]>(`${url}/threads/${X}/events?limit=1000`);
    const creations = events.body.filter((e) => e.type === "ThreadCreated");
    t.same(
      creations.map((e) => e.incarnation),
      [1, 2],
    );
    t.ok(events.body.filter((e) => JSON.stringify(e).includes(firstRun.run_id)).every((e) => e.incarnation === 1));
    t.ok(events.body.filter((e) => JSON.stringify(e).includes(secondRun.run_id)).every((e) => e.incarnation === 2));
    const second = await get<AuditEvent[]>(`${url}/threads/${X}/events?limit=1000&incarnation=2`);
    t.ok(second.body.length > 0 && second.body.every((e) => e.incarnation === 2));
    const replay = await get<Replay>(`${url}/threads/${X}/replay`);
    t.equal(replay.body.incarnation, 2);
    t.same(
      replay.body.runs.map((r) => r.run_id),
      [secondRun.run_id],
      "the current incarnation's runs only",
    );
    t.same(
      replay.body.incarnations.map((i) => [i.incarnation, i.deleted]),
      [
        [1, true],
        [2, false],
      ],
    );
    const first = await get<Replay>(`${url}/threads/${X}/replay?incarnation=1`);
    t.equal(first.body.incarnation, 1);
    t.equal(first.body.thread!.status, "deleted");
    t.same(
      first.body.runs.map((r) => r.run_id),
      [firstRun.run_id],
    );
    // The diff across the boundary: the thread was replaced by another one.
    const lastOfFirst = events.body.filter((e) => e.incarnation === 1 && e.stream === `thread-${X}`).pop()!;
    const across = await get<Replay & { diff: { changes: { path: unknown[] }[] } }>(`${url}/threads/${X}/replay?diff=${lastOfFirst.position}`);
    t.ok(
      across.body.diff.changes.some((c) => c.path[0] === "incarnation"),
      "the diff names the incarnation",
    );

    t.test("a deletion cut short (its checkpoints not deleted) leaves nothing to the next incarnation", async (t) => {
      const Y = crypto.randomUUID();
      await client.threads.create({ threadId: Y, graphId: "agent" });
      await client.runs.wait(Y, "agent", { input: { messages: [human("left behind")] } });
      // The thread's ThreadDeleted only, as a deletion that stopped before CheckpointsDeleted leaves it.
      const [last] = await srv.server.store.readStream(`thread-${Y}`, { direction: "backwards", fromRevision: "end", maxCount: 1 });
      const { position } = await srv.server.store.append(
        `thread-${Y}`,
        [{ type: "ThreadDeleted", data: { deleted_at: new Date().toISOString() } }],
        last.revision,
      );
      await srv.server.readModels.runner.waitFor(position);
      await client.threads.create({ threadId: Y, graphId: "agent" });
      const state = await client.threads.getState(Y);
      t.same(state.values, {}, "no state of the deleted thread");
      t.same(await client.threads.getHistory(Y), []);
      await client.runs.wait(Y, "agent", { input: { messages: [human("fresh")] } });
      t.same(texts((await client.threads.getState(Y)).values), ["fresh", "You said: fresh"]);
    });

    t.test("a purge removes every incarnation; the id can be created again", async (t) => {
      t.equal((await fetch(`${url}/threads/${X}?purge=true`, { method: "DELETE" })).status, 204);
      const after = await get<AuditEvent[]>(`${url}/threads/${X}/events?limit=1000&include_output=true`);
      t.notOk(JSON.stringify(after.body).includes("first words") || JSON.stringify(after.body).includes("second words"));
      const third = await client.threads.create({ threadId: X });
      t.equal(third.thread_id, X);
      const events = await get<AuditEvent[]>(`${url}/threads/${X}/events?limit=1000`);
      const created = events.body.filter((e) => e.type === "ThreadCreated");
      t.equal(created.length, 1, "the new ThreadCreated (the purged ones are tombstones or gone)");
      const replay = await get<Replay>(`${url}/threads/${X}/replay`);
      t.match(replay.body.thread, { status: "idle", deleted: false });
      t.ok(replay.body.incarnations[replay.body.incarnations.length - 1].purged === false);
      t.ok(replay.body.incarnations.slice(0, -1).every((i) => i.purged));
    });
  });
}

t.test("npm run replay: one incarnation at a time, on the data directory alone", async (t) => {
  const srv = await startTestServer();
  t.teardown(() => rm(srv.dataDir, { recursive: true, force: true }));
  const X = crypto.randomUUID();
  for (const word of ["first", "second"]) {
    await srv.client.threads.create({ threadId: X });
    await srv.client.runs.wait(X, "agent", { input: { messages: [human(word)] } });
    if (word === "first") await srv.client.threads.delete(X);
  }
  await srv.server.close();
  const replay = (args: string[]) =>
    new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      execFile(
        process.execPath,
        ["--import", "tsx", "src/app/replay-cli.ts", "--thread", X, ...args],
        { cwd: repoRoot, env: { ...process.env, LANGGRAPH_JSON: TEST_GRAPHS, DATA_DIR: srv.dataDir } },
        (error, stdout, stderr) => resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
    });
  const now = JSON.parse((await replay([])).stdout) as Replay;
  t.equal(now.incarnation, 2, "the current one by default");
  t.same(texts(now.thread!.values), ["second", "You said: second"]);
  const first = JSON.parse((await replay(["--incarnation", "1"])).stdout) as Replay;
  t.equal(first.incarnation, 1);
  t.equal(first.thread!.status, "deleted");
  t.equal(first.runs.length, 1);
  t.notSame(first.runs[0].run_id, now.runs[0].run_id, "its own run");
  const none = await replay(["--incarnation", "3"]);
  t.equal(none.code, 1);
  t.match(none.stderr, /no incarnation 3/);
  const bad = await replay(["--incarnation", "zero"]);
  t.equal(bad.code, 2);
});
