import { randomBytes } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import t, { type Test } from "tap";
import Database from "better-sqlite3";
import { openReadModels, READ_MODELS_FILE, readModelsKeyOf, ReadModelsKeyMismatch, type ReadModels } from "../../src/read-models/all.js";
import { eraseLeftoversOfPurge } from "../../src/read-models/purge.js";
import { parseMasterKeys } from "../../src/crypto/master-keys.js";
import type { EventStore } from "../../src/eventstore/types.js";
import { startTestServer } from "../support/server.js";

/**
 * The read-model database encrypted at rest: real events (a server's log) folded into it with a key
 * leave no plaintext in the file or its WAL, the same key reads them back, and any other key (or
 * none, or a file written before the key) is told apart with a ReadModelsKeyMismatch.
 */

const marker = (what: string) => `marker-${what}-${randomBytes(6).toString("hex")}`;
const markers = { values: marker("thread-values"), input: marker("run-input"), store: marker("store-value"), metadata: marker("thread-metadata") };

/** A log holding every marker: thread values, run input, store value, thread metadata. */
async function markedLog(t: Test): Promise<EventStore> {
  const srv = await startTestServer();
  t.teardown(() => srv.close());
  const { client } = srv;
  const thread = await client.threads.create({ graphId: "agent", metadata: { note: markers.metadata } });
  await client.threads.updateState(thread.thread_id, { values: { messages: [{ role: "user", content: markers.values }] }, asNode: "agent" });
  await client.runs.wait(thread.thread_id, "agent", { input: { messages: [{ role: "user", content: markers.input }] } });
  await client.store.putItem(["enc"], "item", { note: markers.store });
  return srv.server.store;
}

async function tempDir(t: Test): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "agent-server-rm-enc-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** Every byte of the database and its -wal and -shm (those that exist), as latin1 text to search. */
function bytesOf(dir: string): string {
  const file = path.join(dir, READ_MODELS_FILE);
  return ["", "-wal", "-shm"]
    .map((suffix) => file + suffix)
    .filter((f) => existsSync(f))
    .map((f) => readFileSync(f).toString("latin1"))
    .join("\n");
}

async function folded(dir: string, store: EventStore, key: Buffer | undefined): Promise<ReadModels> {
  const models = openReadModels(dir, { key });
  await models.runner.start(store);
  return models;
}

function markersIn(models: ReadModels): string {
  const db = models.runner.db;
  return JSON.stringify([
    db.prepare('SELECT "values", metadata FROM threads').all(),
    db.prepare("SELECT record FROM runs").all(),
    db.prepare("SELECT value FROM store_items").all(),
  ]);
}

const masterKeys = (secret: string) => parseMasterKeys({ LANGGRAPH_AES_KEY: secret })!;

t.test("readModelsKeyOf: 32 bytes, a function of the current master key only, not the key itself", async (t) => {
  const a = readModelsKeyOf(masterKeys("k".repeat(32)));
  t.equal(a.length, 32);
  t.same(readModelsKeyOf(masterKeys("k".repeat(32))), a, "the same master key, the same key");
  t.notSame(readModelsKeyOf(masterKeys("j".repeat(32))), a, "another master key, another key");
  t.notSame(a, Buffer.from("k".repeat(32)), "derived, not the master key");
  const rotated = parseMasterKeys({ LANGGRAPH_AES_KEY: "k".repeat(32), LANGGRAPH_AES_PREVIOUS_KEYS: JSON.stringify(["j".repeat(32)]) })!;
  t.same(readModelsKeyOf(rotated), a, "previous keys play no part");
});

t.test("encrypted read models", async (t) => {
  const store = await markedLog(t);
  const key = readModelsKeyOf(masterKeys("k".repeat(32)));

  t.test("no marker in any byte of the file, -wal or -shm; the same key reads them back", async (t) => {
    const dir = await tempDir(t);
    const models = await folded(dir, store, key);
    const inside = markersIn(models);
    for (const [what, m] of Object.entries(markers)) t.ok(inside.includes(m), `${what} folded into the read models`);
    // Before close, the WAL may hold the newest pages; after it, the file alone.
    for (const [what, m] of Object.entries(markers)) t.notOk(bytesOf(dir).includes(m), `${what} not in the open files`);
    eraseLeftoversOfPurge(models); // the purge's WAL truncation works through the cipher
    await models.runner.close();
    const bytes = bytesOf(dir);
    t.ok(bytes.length > 4096, "the file has content");
    for (const [what, m] of Object.entries(markers)) t.notOk(bytes.includes(m), `${what} not in the closed files`);
    t.notOk(bytes.startsWith("SQLite format 3\0"), "no SQLite header: page 1 is encrypted too");

    const again = openReadModels(dir, { key });
    t.equal(again.runner.rebuilding, false, "reopened, not rebuilt");
    t.equal(markersIn(again), inside, "the same rows");
    t.ok(again.threads.count({}) >= 1, "queries work");
    await again.runner.close();
  });

  t.test("another key, no key, or a plaintext file with a key: ReadModelsKeyMismatch, then a rebuild", async (t) => {
    const dir = await tempDir(t);
    await (await folded(dir, store, key)).runner.close();

    const other = readModelsKeyOf(masterKeys("j".repeat(32)));
    t.throws(() => openReadModels(dir, { key: other }), ReadModelsKeyMismatch, "another key");
    t.throws(() => openReadModels(dir, { key: other }), { name: "ReadModelsKeyMismatch", found: "encrypted", keyGiven: true });
    t.throws(() => openReadModels(dir), { name: "ReadModelsKeyMismatch", found: "encrypted", keyGiven: false }, "no key");
    t.throws(
      () => new Database(path.join(dir, READ_MODELS_FILE)).prepare("SELECT count(*) FROM sqlite_master").get(),
      /not a database/,
      "plain SQLite cannot read it",
    );
    t.ok(existsSync(path.join(dir, READ_MODELS_FILE)), "the mismatch leaves the file to the caller");

    const plainDir = await tempDir(t);
    await (await folded(plainDir, store, undefined)).runner.close();
    t.throws(() => openReadModels(plainDir, { key }), { name: "ReadModelsKeyMismatch", found: "plaintext", keyGiven: true }, "a plaintext file with a key");

    // What the caller does with it: remove the files and open again, rebuilding from the log.
    for (const suffix of ["", "-wal", "-shm"]) await rm(path.join(plainDir, READ_MODELS_FILE) + suffix, { force: true });
    const rebuilt = await folded(plainDir, store, key);
    t.equal(rebuilt.runner.rebuilding, true);
    t.ok(markersIn(rebuilt).includes(markers.input), "rebuilt with the key");
    await rebuilt.runner.close();
    t.notOk(bytesOf(plainDir).includes(markers.input), "and encrypted now");
  });

  t.test("a file an earlier version encrypted with ChaCha20-Poly1305, under the same key: ReadModelsKeyMismatch, then a rebuild", async (t) => {
    const dir = await tempDir(t);
    const file = path.join(dir, READ_MODELS_FILE);
    const CipherDatabase = (await import("better-sqlite3-multiple-ciphers")).default;
    const old = new CipherDatabase(file);
    old.pragma("cipher = 'chacha20'");
    old.pragma(`key = "x'${key.toString("hex")}'"`);
    old.exec("CREATE TABLE leftover (x TEXT); INSERT INTO leftover VALUES ('written before')");
    old.close();
    t.throws(() => openReadModels(dir, { key }), { name: "ReadModelsKeyMismatch", found: "encrypted", keyGiven: true }, "the same key does not open it");
    for (const suffix of ["", "-wal", "-shm"]) await rm(file + suffix, { force: true });
    const rebuilt = await folded(dir, store, key);
    t.equal(rebuilt.runner.rebuilding, true);
    t.ok(markersIn(rebuilt).includes(markers.input), "rebuilt from the log");
    await rebuilt.runner.close();
  });

  t.test("a torn plain file is still removed and rebuilt without asking (no key)", async (t) => {
    const dir = await tempDir(t);
    const header = Buffer.alloc(8192);
    Buffer.from("SQLite format 3\0", "latin1").copy(header);
    writeFileSync(path.join(dir, READ_MODELS_FILE), header);
    const models = openReadModels(dir);
    t.equal(models.runner.rebuilding, true);
    await models.runner.close();
  });

  t.test("without a key the file is plain SQLite, as before", async (t) => {
    const dir = await tempDir(t);
    await (await folded(dir, store, undefined)).runner.close();
    const db = new Database(path.join(dir, READ_MODELS_FILE), { readonly: true });
    t.teardown(() => db.close());
    t.ok(JSON.stringify(db.prepare("SELECT record FROM runs").all()).includes(markers.input), "better-sqlite3 reads it");
  });

  t.test("a key of another length is refused", async (t) => {
    const dir = await tempDir(t);
    t.throws(() => openReadModels(dir, { key: Buffer.alloc(16) }), /must be 32 bytes/);
  });
});

t.test("an overwritten file is still removed and rebuilt without asking, with a key as without", async (t) => {
  const key = readModelsKeyOf(masterKeys("k".repeat(32)));
  for (const given of [undefined, key]) {
    const dir = await tempDir(t);
    writeFileSync(path.join(dir, READ_MODELS_FILE), Buffer.alloc(64 * 1024, 0x5a));
    const models = openReadModels(dir, { key: given });
    t.equal(models.runner.rebuilding, true, given ? "with a key" : "without a key");
    await models.runner.close();
  }
});
