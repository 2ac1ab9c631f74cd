import { randomUUID } from "node:crypto";
import { execFile } from "node:child_process";
import { mkdtemp, readdir, readFile, rm, stat } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import t from "tap";
import { READ_MODELS_FILE, readModelsKeyOf } from "../../src/read-models/all.js";
import { openDatabase } from "../../src/read-models/encrypted-file.js";
import { parseMasterKeys } from "../../src/crypto/master-keys.js";
import { repoRoot, startTestServer, TEST_GRAPHS } from "../support/server.js";

/**
 * The offline tools read an encrypted log as the server does (LANGGRAPH_AES_KEY): `npm run rebuild`
 * folds the opened events, not their sealed form, into read models equal to the live ones, and
 * `npm run replay` answers the thread in plaintext; another key stops either in one line, before
 * the rebuild deletes anything.
 */

const KEY = "0123456789abcdef0123456789abcdef";
const WRONG_KEY = "another key of 32 bytes, exactly";
const ENV = { LANGGRAPH_AES_KEY: KEY, LANGGRAPH_AES_JSON_KEYS: "secret" };

type Messages = { messages: { content: string }[] };

function cli(script: string, env: Record<string, string>, args: string[] = []): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ["--import", "tsx", script, ...args],
      // The parent's own key variables never leak into the tool: each call names the key it runs with.
      {
        cwd: repoRoot,
        env: { ...process.env, LANGGRAPH_AES_KEY: "", LANGGRAPH_AES_PREVIOUS_KEYS: "", LANGGRAPH_AES_JSON_KEYS: "", LANGGRAPH_JSON: TEST_GRAPHS, ...env },
      },
      (error, stdout, stderr) => resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/** Every row of every table of a read-model database (encrypted with the key's), in primary-key order (positions and fingerprints excluded). */
function dump(file: string): Record<string, unknown[]> {
  const db = openDatabase(file, { readonly: true }, readModelsKeyOf(parseMasterKeys(ENV)!));
  try {
    const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name <> 'read_model_meta' ORDER BY name").pluck().all() as string[];
    return Object.fromEntries(tables.map((name) => [name, db.prepare(`SELECT * FROM "${name}" ORDER BY 1, 2`).all()]));
  } finally {
    db.close();
  }
}

async function logBytes(dataDir: string): Promise<Buffer> {
  const files = (await readdir(dataDir)).filter((f) => f.startsWith("events.sqlite"));
  return Buffer.concat(await Promise.all(files.map((f) => readFile(path.join(dataDir, f)))));
}

t.test("rebuild and replay read an encrypted log through its key vault; another key stops them in one line", async (t) => {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), "rebuild-encrypted-"));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const input = `input${randomUUID().replaceAll("-", "")}`;
  const secret = `secret${randomUUID().replaceAll("-", "")}`;

  const srv = await startTestServer({ env: ENV, dataDir });
  let running = true;
  t.teardown(() => (running ? srv.server.close() : undefined));
  const thread = await srv.client.threads.create({ metadata: { secret, visible: "shown" } });
  await srv.client.runs.wait(thread.thread_id, "agent", { input: { messages: [{ role: "user", content: input }] } });
  const before = await srv.client.threads.get(thread.thread_id);
  t.same(
    (before.values as Messages).messages.map((m) => m.content),
    [input, `You said: ${input}`],
  );
  await srv.server.close();
  running = false;
  const bytes = await logBytes(dataDir);
  t.ok(bytes.includes(thread.thread_id) && !bytes.includes(input) && !bytes.includes(secret), "the log holds the thread sealed");

  const file = path.join(dataDir, READ_MODELS_FILE);
  const live = dump(file);

  // Another key: one line naming the variable, and the read models are left as they were.
  const modified = (await stat(file)).mtimeMs;
  const wrong = await cli("src/read-models/rebuild.ts", { DATA_DIR: dataDir, LANGGRAPH_AES_KEY: WRONG_KEY });
  t.not(wrong.code, 0, "the rebuild exits non-zero with another key");
  const lines = wrong.stderr.trim().split("\n");
  t.equal(lines.length, 1, `one line on stderr: ${wrong.stderr}`);
  t.match(lines[0], /^rebuild: .*LANGGRAPH_AES_KEY/, "naming the variable");
  t.equal((await stat(file)).mtimeMs, modified, "nothing was deleted");
  t.same(dump(file), live, "the read models are untouched");

  const rebuilt = await cli("src/read-models/rebuild.ts", { DATA_DIR: dataDir, ...ENV });
  t.equal(rebuilt.code, 0, rebuilt.stderr);
  const report = JSON.parse(rebuilt.stdout.trim().split("\n").pop()!) as { rebuild: { events: number; quarantined: { entries: number } } };
  t.ok(report.rebuild.events > 5, "folded the log's events");
  t.equal(report.rebuild.quarantined.entries, 0, "nothing quarantined: no sealed event reached a fold");
  t.same(dump(file), live, "same rows as the live server's read models");

  // Replay folds the log itself, read-only: the thread in plaintext; another key is refused.
  const replayed = await cli("src/app/replay-cli.ts", { DATA_DIR: dataDir, ...ENV }, ["--thread", thread.thread_id]);
  t.equal(replayed.code, 0, replayed.stderr);
  const state = JSON.parse(replayed.stdout) as { thread: { values: Messages; metadata: Record<string, unknown> } };
  t.same(
    state.thread.values.messages.map((m) => m.content),
    [input, `You said: ${input}`],
    "replay: the thread's values",
  );
  t.match(state.thread.metadata, { secret, visible: "shown" }, "replay: its metadata, the sealed key included");
  const refused = await cli("src/app/replay-cli.ts", { DATA_DIR: dataDir, LANGGRAPH_AES_KEY: WRONG_KEY }, ["--thread", thread.thread_id]);
  t.not(refused.code, 0, "replay exits non-zero with another key");
  t.equal(refused.stderr.trim().split("\n").length, 1, `one line on stderr: ${refused.stderr}`);
  t.match(refused.stderr, /^replay: .*LANGGRAPH_AES_KEY/);

  // The server on the rebuilt read models answers the thread as before.
  const again = await startTestServer({ env: ENV, dataDir });
  t.teardown(() => again.server.close());
  const after = await again.client.threads.get(thread.thread_id);
  t.same(after.values, before.values, "the thread's values read back the same");
  t.same(after.metadata, before.metadata, "and its metadata");
});
