import t, { type Test } from "tap";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { loadConfig } from "../../../src/config.js";
import { startServer } from "../../../src/server.js";
import { spawnServer } from "../../support/process.js";

/** Item 1: a configured `auth` that is not a usable Auth instance stops the start with one line. */

const testDir = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const AGENT = path.join(testDir, "graphs", "agent.ts");

async function projectWith(t: Test, authPath: string, files: Record<string, string> = {}) {
  const dir = await mkdtemp(path.join(os.tmpdir(), "agent-server-auth-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  for (const [name, text] of Object.entries(files)) await writeFile(path.join(dir, name), text);
  await writeFile(path.join(dir, "langgraph.json"), JSON.stringify({ graphs: { agent: `${AGENT}:graph` }, auth: { path: authPath } }));
  return dir;
}

const start = (dir: string) =>
  startServer(
    loadConfig({ LANGGRAPH_JSON: path.join(dir, "langgraph.json"), DATA_DIR: path.join(dir, "data"), HOST: "127.0.0.1", PORT: "0", LOG_LEVEL: "silent" }),
  );

t.test("every way of naming an unusable auth is refused with one line naming the file and the export", async (t) => {
  const cases: [string, string, Record<string, string>, RegExp][] = [
    ["missing file", "./nope.ts:auth", {}, /auth\.path "\.\/nope\.ts:auth": cannot load \.\/nope\.ts/],
    ["syntax error", "./broken.ts:auth", { "broken.ts": "export const auth = ;" }, /auth\.path "\.\/broken\.ts:auth": cannot load \.\/broken\.ts/],
    ["throws on import", "./throws.mjs:auth", { "throws.mjs": "throw new Error('boom at import');" }, /cannot load \.\/throws\.mjs: boom at import/],
    ["no such export", "./plain.mjs:auth", { "plain.mjs": "export const other = 1;" }, /\.\/plain\.mjs has no export "auth"/],
    ["default export missing", "./plain.mjs", { "plain.mjs": "export const other = 1;" }, /\.\/plain\.mjs has no export "default"/],
    ["not an Auth", "./fake.mjs:auth", { "fake.mjs": "export const auth = { authenticate() {} };" }, /export "auth" of \.\/fake\.mjs is not an Auth instance/],
    ["Auth without authenticate", path.join(testDir, "auth", "no-authenticate.ts") + ":auth", {}, /has no authenticate\(\) handler/],
  ];
  for (const [name, authPath, files, expected] of cases) {
    const dir = await projectWith(t, authPath, files);
    const error = await start(dir).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    t.ok(error, `${name}: refused`);
    t.match(error?.message, expected, name);
    t.match(error?.message, /^langgraph\.json: auth\.path /, `${name}: names the config field`);
    t.notOk(error?.message.includes("\n"), `${name}: one line`);
  }
});

t.test("the process exits non-zero with that line and never listens", async (t) => {
  const dir = await projectWith(t, "./fake.mjs:auth", { "fake.mjs": "export const auth = {};" });
  const proc = await spawnServer({ LANGGRAPH_JSON: path.join(dir, "langgraph.json"), DATA_DIR: path.join(dir, "data") });
  const { code } = await proc.exited;
  t.equal(code, 1);
  t.equal(proc.url, undefined, "never printed a listening line");
  t.equal(
    proc.stderr.trim(),
    'agent-server: langgraph.json: auth.path "./fake.mjs:auth": export "auth" of ./fake.mjs is not an Auth instance (new Auth() from @langchain/langgraph-sdk/auth)',
  );
});
