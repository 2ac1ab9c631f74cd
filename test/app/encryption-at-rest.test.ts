import { randomUUID } from "node:crypto";
import { copyFile, mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import t, { type Test } from "tap";
import { KeyDestroyedError, openSealer, type Sealer } from "../../src/crypto/sealer.js";
import { parseMasterKeys } from "../../src/crypto/master-keys.js";
import { SEALED_FIELD } from "../../src/eventstore/encrypting.js";
import { startTestServer, TEST_GRAPHS, type TestServer } from "../support/server.js";
import { startEsdbTestDouble } from "../support/esdb-test-double.js";
import { spawnServer, stopServer } from "../support/process.js";
import { ConfigError, loadConfig } from "../../src/config.js";
import { requestHash } from "../../src/domain/idempotency.js";

/**
 * Encryption at rest of the event log (LANGGRAPH_AES_KEY), end to end on both stores: what a user
 * wrote or a graph produced is in no byte of the log, the API still answers it in plaintext, and a
 * purge destroys the thread's data keys, so that no copy of the log (a backup of the SQLite file,
 * EventStoreDB before its scavenge) gives it back, even with the master key.
 *
 * Every file of the data directory is scanned: the log, its WAL, the key vault and the read models
 * (read-models.sqlite, encrypted as a whole with a key derived from the master key).
 */

const KEY = "0123456789abcdef0123456789abcdef";
const ENV = { LANGGRAPH_AES_KEY: KEY, LANGGRAPH_AES_JSON_KEYS: "secret" };
const human = (content: string) => ({ role: "user", content });
/** What a marker is, for the messages: its name, or for a bare hash, the request's fingerprint. */
const labelOf = (m: string) => m.replace(/[0-9a-f]+$/, "") || "the request's fingerprint";
/** Letters only, so JSON escaping leaves it as it is and a byte scan finds it. */
const marker = (name: string) => `${name}${randomUUID().replaceAll("-", "")}`;

interface Written {
  threadId: string;
  /** The purged thread's markers: a run's input (and so its output and checkpoints), a named metadata key, a state update. */
  threadMarkers: string[];
  /** A store item's value: not the thread's, never purged. */
  storeMarker: string;
}

type Messages = { messages: { content: string }[] };

/** Writes every kind of content through the API, and checks the API answers it in plaintext. */
async function writeContent(t: Test, srv: TestServer): Promise<Written> {
  const [input, metadata, state, store, keyed, cron] = [marker("input"), marker("metadata"), marker("state"), marker("store"), marker("keyed"), marker("cron")];
  const thread = await srv.client.threads.create({ metadata: { secret: metadata, visible: "shown" } });
  const result = (await srv.client.runs.wait(thread.thread_id, "agent", { input: { messages: [human(input)] } })) as Messages;
  t.ok(
    result.messages.some((m) => m.content === `You said: ${input}`),
    "the run's output, in plaintext",
  );
  // A run created with an Idempotency-Key: the key's record is a stream of its own, outside the thread's.
  const idempotent = { assistant_id: "agent", input: { messages: [human(keyed)] } };
  const headers = { "content-type": "application/json", "idempotency-key": marker("key") };
  const keyedRun = await fetch(`${srv.url}/threads/${thread.thread_id}/runs/wait`, { method: "POST", headers, body: JSON.stringify(idempotent) });
  t.equal(keyedRun.status, 200);
  t.ok(
    ((await keyedRun.json()) as Messages).messages.some((m) => m.content === `You said: ${keyed}`),
    "the keyed run's output",
  );
  const again = await fetch(`${srv.url}/threads/${thread.thread_id}/runs`, { method: "POST", headers, body: JSON.stringify(idempotent) });
  t.match(await again.json(), { kwargs: { input: idempotent.input } }, "a retry with the key answers the run, its input included");
  // A cron on the thread (a stream of its own): its payload is the input of every run it starts.
  await srv.client.crons.createForThread(thread.thread_id, "agent", { schedule: "0 0 1 1 *", input: { messages: [human(cron)] } });
  await srv.client.threads.updateState(thread.thread_id, { values: { messages: [human(state)] } });
  await srv.client.store.putItem(["enc"], "item", { note: store });

  const read = await srv.client.threads.get(thread.thread_id);
  t.match(read.metadata, { secret: metadata, visible: "shown" }, "the thread's metadata, named key included");
  t.same(
    (read.values as Messages).messages.map((m) => m.content),
    [input, `You said: ${input}`, keyed, `You said: ${keyed}`, state],
    "the thread's values (from its checkpoints)",
  );
  const [run] = await srv.client.runs.list(thread.thread_id);
  t.equal(run.status, "success");
  const history = await srv.client.threads.getHistory(thread.thread_id);
  t.ok(JSON.stringify(history).includes(input) && JSON.stringify(history).includes(state), "the checkpoints' history");
  t.same((await srv.client.store.getItem(["enc"], "item"))?.value, { note: store }, "the store item");
  const found = await srv.client.threads.search({ metadata: { visible: "shown" } });
  t.ok(
    found.some((f) => f.thread_id === thread.thread_id),
    "metadata left in clear is still searched",
  );
  // The key's claim holds the request's fingerprint: a hash that would confirm a guess of the request.
  const fingerprint = requestHash(thread.thread_id, idempotent);
  return { threadId: thread.thread_id, threadMarkers: [input, metadata, state, keyed, cron, fingerprint], storeMarker: store };
}

/** Every file of the data directory: the embedded log and its WAL, the key vault, the read models. */
async function dataDirBytes(dataDir: string): Promise<Buffer> {
  const files = (await readdir(dataDir, { withFileTypes: true })).filter((f) => f.isFile()).map((f) => f.name);
  return Buffer.concat(await Promise.all(files.map((f) => readFile(path.join(dataDir, f)))));
}

/** Every event the EventStoreDB double keeps in its data file (one JSON line per change, data in base64), deleted ones included. */
async function doubleEvents(dataFile: string): Promise<{ stream: string; type: string; data: string; metadata: string }[]> {
  const events: { stream: string; type: string; data: string; metadata: string }[] = [];
  for (const line of (await readFile(dataFile, "utf8")).split("\n")) {
    if (!line.trim()) continue;
    const record = JSON.parse(line) as { op: string; stream?: string; events?: { type: string; data: string; metadata: string }[] };
    for (const e of record.op === "write" ? (record.events ?? []) : []) {
      events.push({
        stream: record.stream!,
        type: e.type,
        data: Buffer.from(e.data, "base64").toString("utf8"),
        metadata: Buffer.from(e.metadata, "base64").toString("utf8"),
      });
    }
  }
  return events;
}

function vaultSealer(dataDir: string): Sealer {
  return openSealer({ vaultPath: path.join(dataDir, "keys.sqlite"), masterKeys: parseMasterKeys({ LANGGRAPH_AES_KEY: KEY })! });
}

/** The envelopes of these events' data (the sealed ones). */
function envelopesOf(events: { stream: string; data: string }[]): { stream: string; envelope: string }[] {
  return events.flatMap((e) => {
    const data = JSON.parse(e.data) as unknown;
    const envelope = data && typeof data === "object" ? (data as Record<string, unknown>)[SEALED_FIELD] : undefined;
    return typeof envelope === "string" ? [{ stream: e.stream, envelope }] : [];
  });
}

/** Tries to open each envelope: every one must be lost for good. */
function expectShredded(t: Test, sealer: Sealer, envelopes: { stream: string; envelope: string }[], what: string): void {
  t.ok(envelopes.length > 0, `${what}: sealed events of the thread to try (${envelopes.length})`);
  const opened = envelopes.filter(({ stream, envelope }) => {
    try {
      sealer.open(stream, envelope);
      return true;
    } catch (error) {
      if (!(error instanceof KeyDestroyedError)) throw error;
      return false;
    }
  });
  t.same(
    opened.map((e) => e.stream),
    [],
    `${what}: none opens with the master key`,
  );
}

/** The Idempotency-Key claims among these events: their fingerprint is sealed, and they are shredded with the thread. */
function expectClaimsShredded(t: Test, sealer: Sealer, events: { stream: string; type: string; data: string }[], what: string): void {
  const claims = events.filter((e) => e.type === "IdempotencyKeyClaimed");
  t.equal(claims.length, 1, `${what}: the key's claim`);
  t.notOk(
    claims.some((e) => "request_hash" in (JSON.parse(e.data) as object)),
    `${what}: its fingerprint is not in clear`,
  );
  expectShredded(t, sealer, envelopesOf(claims), `${what}, the key's claim`);
}

/** Opens every envelope of the whole log that still opens: none may give back a purged thread's marker, whatever stream holds it. */
function expectNoMarkerOpens(t: Test, sealer: Sealer, events: { stream: string; data: string }[], markers: string[], what: string): void {
  const leaks: string[] = [];
  let opened = 0;
  for (const { stream, envelope } of envelopesOf(events)) {
    let plaintext: string;
    try {
      plaintext = sealer.open(stream, envelope);
    } catch (error) {
      if (error instanceof KeyDestroyedError) continue;
      throw error;
    }
    opened++;
    for (const m of markers) if (plaintext.includes(m)) leaks.push(`${labelOf(m)} in ${stream}`);
  }
  t.ok(opened > 0, `${what}: the other envelopes open (${opened})`);
  t.same(leaks, [], `${what}: no envelope of any stream that still opens holds the purged thread's content`);
}

t.test("SQLite: content is sealed in the log, a purge shreds it, a wrong key refuses to start", async (t) => {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), "encryption-at-rest-"));
  const backup = await mkdtemp(path.join(os.tmpdir(), "encryption-at-rest-backup-"));
  t.teardown(() => Promise.all([rm(dataDir, { recursive: true, force: true }), rm(backup, { recursive: true, force: true })]));
  const srv = await startTestServer({ env: ENV, dataDir });
  let running = true;
  t.teardown(() => (running ? srv.server.close() : undefined));

  const written = await writeContent(t, srv);
  const bytes = await dataDirBytes(dataDir);
  t.ok(bytes.includes(written.threadId), "the scan reads the log (the thread's id is in clear)");
  for (const m of [...written.threadMarkers, written.storeMarker]) t.notOk(bytes.includes(m), `${labelOf(m)}: in no byte of the data directory`);

  // A copy of the log as it is now (a backup): its sealed events must be lost with the purge too.
  for (const f of (await readdir(dataDir)).filter((f) => f.startsWith("events.sqlite"))) await copyFile(path.join(dataDir, f), path.join(backup, f));

  t.equal((await fetch(`${srv.url}/threads/${written.threadId}?purge=true`, { method: "DELETE" })).status, 204);
  const events = (await (await fetch(`${srv.url}/threads/${written.threadId}/events?include_output=true&limit=1000`)).json()) as { type: string }[];
  const text = JSON.stringify(events);
  for (const m of written.threadMarkers) t.notOk(text.includes(m), "the audit API gives nothing of it back");
  t.ok(
    events.some((e) => e.type === "ThreadPurged"),
    "the purge is recorded",
  );
  t.same([...new Set(events.map((e) => e.type))].sort(), ["EventPurged", "ThreadPurged"], "the thread's events read as purged");
  t.same((await srv.client.store.getItem(["enc"], "item"))?.value, { note: written.storeMarker }, "other content is still read");
  await srv.server.close();
  running = false;

  const db = new Database(path.join(backup, "events.sqlite"));
  const rows = db.prepare("SELECT stream_id AS stream, data FROM events WHERE stream_id LIKE ?").all(`%${written.threadId}%`) as {
    stream: string;
    data: string;
  }[];
  const allRows = db.prepare("SELECT stream_id AS stream, type, data FROM events").all() as { stream: string; type: string; data: string }[];
  const storeRows = db.prepare("SELECT stream_id AS stream, data FROM events WHERE stream_id LIKE 'store-%'").all() as { stream: string; data: string }[];
  db.close();
  const sealer = vaultSealer(dataDir);
  try {
    expectShredded(t, sealer, envelopesOf(rows), "a backup taken before the purge");
    expectNoMarkerOpens(t, sealer, allRows, written.threadMarkers, "a backup taken before the purge");
    expectClaimsShredded(t, sealer, allRows, "a backup taken before the purge");
    const [item] = envelopesOf(storeRows);
    t.ok(sealer.open(item.stream, item.envelope).includes(written.storeMarker), "the same vault and key still open what was not purged");
  } finally {
    sealer.close();
  }

  // A restart with another key refuses to start, in one line naming the variable.
  const wrong = await spawnServer({ DATA_DIR: dataDir, LANGGRAPH_JSON: TEST_GRAPHS, LANGGRAPH_AES_KEY: "another key of 32 bytes, exactly" });
  t.teardown(() => stopServer(wrong));
  const exit = await wrong.exited;
  t.not(exit.code, 0, "exits non-zero");
  t.equal(wrong.url, undefined, "never listened");
  const lines = wrong.stderr.trim().split("\n");
  t.equal(lines.length, 1, `one line on stderr: ${wrong.stderr}`);
  t.match(lines[0], /LANGGRAPH_AES_KEY/, "naming the variable");
});

t.test("EventStoreDB: content is sealed in the log, and what a purge leaves until the scavenge is unreadable", async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), "encryption-at-rest-esdb-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const dataFile = path.join(dir, "esdb.jsonl");
  const esdb = await startEsdbTestDouble({ dataFile });
  t.teardown(() => esdb.close());
  const dataDir = path.join(dir, "data");
  const srv = await startTestServer({ env: { ...ENV, EVENTSTORE_URL: esdb.connectionString }, dataDir });
  let running = true;
  t.teardown(() => (running ? srv.server.close() : undefined));

  const written = await writeContent(t, srv);
  const before = await doubleEvents(dataFile);
  t.ok(
    before.some((e) => e.stream.includes(written.threadId)),
    "the scan reads the double's log",
  );
  const text = before.map((e) => `${e.data}\n${e.metadata}`).join("\n");
  for (const m of [...written.threadMarkers, written.storeMarker]) t.notOk(text.includes(m), `${labelOf(m)}: in no event of the double's log`);
  const local = await dataDirBytes(dataDir);
  for (const m of [...written.threadMarkers, written.storeMarker]) t.notOk(local.includes(m), `${labelOf(m)}: in no byte of the data directory`);

  t.equal((await fetch(`${srv.url}/threads/${written.threadId}?purge=true`, { method: "DELETE" })).status, 204);
  const events = (await (await fetch(`${srv.url}/threads/${written.threadId}/events?include_output=true&limit=1000`)).json()) as { type: string }[];
  t.same(
    events.map((e) => e.type),
    ["ThreadPurged"],
    "only the record of the purge is left",
  );
  await srv.server.close();
  running = false;

  // A soft delete: the events are still in the double's log until a scavenge, sealed with destroyed keys.
  const all = await doubleEvents(dataFile);
  const after = all.filter((e) => e.stream.includes(written.threadId));
  const sealer = vaultSealer(dataDir);
  try {
    expectShredded(t, sealer, envelopesOf(after), "the deleted events before the scavenge");
    expectNoMarkerOpens(t, sealer, all, written.threadMarkers, "the double's log");
    expectClaimsShredded(t, sealer, all, "the double's log");
  } finally {
    sealer.close();
  }
});

t.test("metadata keys named in LANGGRAPH_AES_JSON_KEYS are not searchable; the rest of metadata is", async (t) => {
  // One server with the named key, one without it (the same data): a filter on the key finds the thread only on the second.
  for (const named of [true, false]) {
    const srv = await startTestServer({ env: named ? ENV : { LANGGRAPH_AES_KEY: KEY } });
    t.teardown(() => srv.close());
    const secret = marker("secret");
    const visible = marker("visible");
    const metadata = { secret, visible };
    const thread = await srv.client.threads.create({ metadata });
    const assistant = await srv.client.assistants.create({ graphId: "agent", metadata });
    await srv.client.crons.createForThread(thread.thread_id, "agent", { schedule: "0 0 1 1 *", metadata });
    const what = named ? "named" : "not named";
    t.match((await srv.client.threads.get(thread.thread_id)).metadata, metadata, `${what}: the thread answers its metadata in plaintext`);

    const threadIds = async (filter: Record<string, unknown>) => (await srv.client.threads.search({ metadata: filter })).map((x) => x.thread_id);
    const assistantIds = async (filter: Record<string, unknown>) => (await srv.client.assistants.search({ metadata: filter })).map((x) => x.assistant_id);
    const cronThreads = async (filter: Record<string, unknown>) =>
      (
        (await (
          await fetch(`${srv.url}/runs/crons/search`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ metadata: filter }),
          })
        ).json()) as { thread_id: string }[]
      ).map((c) => c.thread_id);
    const counts = async (filter: Record<string, unknown>) => [
      await srv.client.threads.count({ metadata: filter }),
      await srv.client.assistants.count({ metadata: filter }),
      await srv.client.crons.count({ metadata: filter }),
    ];
    t.same(await threadIds({ visible }), [thread.thread_id], `${what}: a key in clear finds the thread`);
    t.same(await assistantIds({ visible }), [assistant.assistant_id], `${what}: and the assistant`);
    t.same(await cronThreads({ visible }), [thread.thread_id], `${what}: and the cron`);
    t.same(await threadIds({ secret }), named ? [] : [thread.thread_id], `${what}: threads by the sealed key`);
    t.same(await threadIds({ secret, visible }), named ? [] : [thread.thread_id], `${what}: threads by both keys`);
    t.same(await assistantIds({ secret }), named ? [] : [assistant.assistant_id], `${what}: assistants by the sealed key`);
    t.same(await cronThreads({ secret }), named ? [] : [thread.thread_id], `${what}: crons by the sealed key`);
    t.same(await counts({ secret }), named ? [0, 0, 0] : [1, 1, 1], `${what}: counts by the sealed key`);
  }
});

t.test("without a key nothing changes: no vault, events as they were", async (t) => {
  const srv = await startTestServer();
  t.teardown(() => srv.close());
  const m = marker("plain");
  const thread = await srv.client.threads.create({ metadata: { secret: m } });
  t.notOk((await readdir(srv.dataDir)).includes("keys.sqlite"), "no key vault");
  t.ok((await dataDirBytes(srv.dataDir)).includes(m), "the log holds plaintext, as before");
  t.ok(thread.thread_id);
});

t.test("configuration: LANGGRAPH_AES_JSON_KEYS and LANGGRAPH_KEY_VAULT", async (t) => {
  const base = { DATA_DIR: "/tmp/enc-data", LANGGRAPH_AES_KEY: KEY };
  t.same(loadConfig(base).encryption?.jsonKeys, []);
  t.equal(loadConfig(base).encryption?.vaultPath, "/tmp/enc-data/keys.sqlite", "the vault's default place");
  t.equal(loadConfig({ ...base, LANGGRAPH_KEY_VAULT: "/tmp/vault.sqlite" }).encryption?.vaultPath, "/tmp/vault.sqlite");
  t.same(loadConfig({ ...base, LANGGRAPH_AES_JSON_KEYS: " email, phone ,,email" }).encryption?.jsonKeys, ["email", "phone"], "a comma-separated list");
  t.same(loadConfig({ ...base, LANGGRAPH_AES_JSON_KEYS: '["a,b", "c"]' }).encryption?.jsonKeys, ["a,b", "c"], "a JSON array");
  t.equal(loadConfig({ DATA_DIR: "/tmp/enc-data" }).encryption, undefined, "no key: no encryption");
  for (const [what, env] of [
    ["bad JSON", { ...base, LANGGRAPH_AES_JSON_KEYS: "[email" }],
    ["not strings", { ...base, LANGGRAPH_AES_JSON_KEYS: "[1]" }],
    ["named keys without a master key", { LANGGRAPH_AES_JSON_KEYS: "email" }],
  ] as const) {
    try {
      loadConfig(env);
      t.fail(`${what}: accepted`);
    } catch (error) {
      t.ok(error instanceof ConfigError, `${what}: ConfigError`);
      t.match((error as Error).message, /^[^\n]*LANGGRAPH_AES_(JSON_KEYS|KEY)[^\n]*$/, `${what}: one line naming the variable`);
    }
  }
});
