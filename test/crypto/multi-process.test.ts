/**
 * Two processes sharing one vault file (two servers against one log): sealing for new streams at the same time,
 * with a small pool that does not grow, so that their refills contend for the write lock, they never hand out the same key.
 */
import t from "tap";
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import Database from "better-sqlite3";
import { parseMasterKeys } from "../../src/crypto/master-keys.js";
import { openSealer } from "../../src/crypto/sealer.js";

const KEY = "m".repeat(32);
const STREAMS = 400;
const POOL = 16;
const sealerModule = pathToFileURL(path.resolve(import.meta.dirname, "../../src/crypto/sealer.ts")).href;

/** A child that seals one value for each of STREAMS new streams and prints [stream, envelope] pairs as JSON. */
function child(vaultPath: string, prefix: string): Promise<[string, string][]> {
  const code = `
    const { openSealer } = await import(${JSON.stringify(sealerModule)});
    const key = Buffer.from(${JSON.stringify(KEY)});
    const { createHash } = await import("node:crypto");
    const master = { id: createHash("sha256").update(key).digest("hex").slice(0, 16), key };
    const sealer = openSealer({ vaultPath: ${JSON.stringify(vaultPath)}, masterKeys: { current: master, all: [master] }, poolSize: ${POOL}, maxBlockSize: ${POOL} });
    const out = [];
    for (let i = 0; i < ${STREAMS}; i++) {
      const stream = ${JSON.stringify(prefix)} + i;
      out.push([stream, sealer.seal(stream, JSON.stringify(stream))]);
      // Yield now and then, so that scheduled refills run while the other process refills too.
      if (i % 7 === 0) await new Promise((resolve) => setImmediate(resolve));
    }
    sealer.close();
    process.stdout.write(JSON.stringify(out));
  `;
  return promisify(execFile)(process.execPath, ["--import=tsx", "--input-type=module", "-e", code], { maxBuffer: 64 * 1024 * 1024 }).then(
    ({ stdout }) => JSON.parse(stdout) as [string, string][],
  );
}

t.test("two processes sealing at once on one vault never share a key", async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "crypto-vault-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const vaultPath = path.join(dir, "keys.db");
  const [a, b] = await Promise.all([child(vaultPath, "a-"), child(vaultPath, "b-")]);
  const sealer = openSealer({ vaultPath, masterKeys: parseMasterKeys({ LANGGRAPH_AES_KEY: KEY })! });
  t.teardown(() => sealer.close());
  const ids = new Set<string>();
  for (const [stream, envelope] of [...a, ...b]) {
    ids.add(sealer.keyIdOf(envelope));
    if (sealer.open(stream, envelope) !== JSON.stringify(stream)) t.fail(stream);
  }
  t.equal(ids.size, 2 * STREAMS, "one key per stream, none shared");
  const db = new Database(vaultPath, { readonly: true });
  const { blocks } = db.prepare<[], { blocks: number }>("SELECT count(DISTINCT block) AS blocks FROM data_keys").get()!;
  db.close();
  t.ok(blocks >= (2 * STREAMS) / POOL, `${blocks} refills`);
});

/** A child that opens the vault and destroys these keys, as a server purging a thread does. */
function destroyInChild(vaultPath: string, keyIds: string[]): Promise<unknown> {
  const code = `
    const { openSealer } = await import(${JSON.stringify(sealerModule)});
    const { parseMasterKeys } = await import(${JSON.stringify(pathToFileURL(path.resolve(import.meta.dirname, "../../src/crypto/master-keys.ts")).href)});
    const sealer = openSealer({ vaultPath: ${JSON.stringify(vaultPath)}, masterKeys: parseMasterKeys({ LANGGRAPH_AES_KEY: ${JSON.stringify(KEY)} }) });
    sealer.destroy(${JSON.stringify(keyIds)});
    sealer.close();
  `;
  return promisify(execFile)(process.execPath, ["--import=tsx", "--input-type=module", "-e", code]);
}

t.test("a key another process destroys is forgotten here: its values do not open from memory, its stream seals with a fresh key", async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "crypto-vault-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const vaultPath = path.join(dir, "keys.db");
  const sealer = openSealer({ vaultPath, masterKeys: parseMasterKeys({ LANGGRAPH_AES_KEY: KEY })!, destructionCheckMs: 0 });
  t.teardown(() => sealer.close());
  const purged = sealer.seal("thread-a", '"before"');
  const kept = sealer.seal("thread-b", '"kept"');
  t.equal(sealer.open("thread-a", purged), '"before"');
  await destroyInChild(vaultPath, [sealer.keyIdOf(purged)]);
  t.throws(() => sealer.open("thread-a", purged), { name: "KeyDestroyedError" }, "the value sealed here no longer opens here");
  const again = sealer.seal("thread-a", '"after"');
  t.not(sealer.keyIdOf(again), sealer.keyIdOf(purged), "the stream, used again, seals with a fresh key");
  t.equal(sealer.open("thread-a", again), '"after"');
  t.equal(sealer.open("thread-b", kept), '"kept"', "other streams are untouched");
});
