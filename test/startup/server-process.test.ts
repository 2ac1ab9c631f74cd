import t, { type Test } from "tap";
import { mkdtemp, rm } from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { once } from "node:events";
import { spawnServer } from "../support/process.js";
import { TEST_GRAPHS } from "../support/server.js";

/** `npm start`'s process: starts on the embedded store, fails with one clear line, stops cleanly. */

const tempDir = async (t: Test) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), "agent-server-proc-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
};

t.test("starts on the embedded store, serves /ok and /info, exits 0 on SIGTERM", async (t) => {
  const dataDir = await tempDir(t);
  const proc = await spawnServer({ DATA_DIR: dataDir, LANGGRAPH_JSON: TEST_GRAPHS });
  t.ok(proc.url, `listening line printed (stderr: ${proc.stderr})`);
  const ok = await fetch(`${proc.url}/ok`);
  t.equal(ok.status, 200);
  t.same(await ok.json(), { ok: true });
  const info = (await (await fetch(`${proc.url}/info`)).json()) as { version: string; store: { kind: string } };
  t.equal(info.store.kind, "sqlite");
  t.match(info.version, /^\d+\.\d+\.\d+/);
  proc.child.kill("SIGTERM");
  const { code } = await proc.exited;
  t.equal(code, 0, "exit code 0 after SIGTERM");
});

t.test("SIGINT also stops it cleanly and the data survives a restart", async (t) => {
  const dataDir = await tempDir(t);
  const first = await spawnServer({ DATA_DIR: dataDir, LANGGRAPH_JSON: TEST_GRAPHS });
  const created = (await (await fetch(`${first.url}/threads`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })).json()) as {
    thread_id: string;
  };
  first.child.kill("SIGINT");
  t.equal((await first.exited).code, 0);
  const second = await spawnServer({ DATA_DIR: dataDir, LANGGRAPH_JSON: TEST_GRAPHS });
  t.teardown(async () => {
    second.child.kill("SIGTERM");
    await second.exited;
  });
  const again = await fetch(`${second.url}/threads/${created.thread_id}`);
  t.equal(again.status, 200, "thread created before the restart is still there");
});

t.test("a taken port gives one clear error line and a non-zero exit", async (t) => {
  const dataDir = await tempDir(t);
  const blocker = net.createServer();
  blocker.listen(0, "127.0.0.1");
  await once(blocker, "listening");
  t.teardown(() => new Promise<void>((r) => blocker.close(() => r())));
  const port = (blocker.address() as net.AddressInfo).port;
  const proc = await spawnServer({ DATA_DIR: dataDir, PORT: String(port), LANGGRAPH_JSON: TEST_GRAPHS });
  const { code } = await proc.exited;
  t.not(code, 0);
  t.equal(proc.url, undefined);
  const lines = proc.stderr.trim().split("\n");
  t.equal(lines.length, 1, `one line: ${proc.stderr}`);
  t.match(lines[0], new RegExp(`port ${port} on 127\\.0\\.0\\.1 is already in use`));
});

t.test("a database locked by another server gives one clear error line and a non-zero exit", async (t) => {
  const dataDir = await tempDir(t);
  const first = await spawnServer({ DATA_DIR: dataDir, LANGGRAPH_JSON: TEST_GRAPHS });
  t.teardown(async () => {
    first.child.kill("SIGTERM");
    await first.exited;
  });
  t.ok(first.url);
  const second = await spawnServer({ DATA_DIR: dataDir, LANGGRAPH_JSON: TEST_GRAPHS });
  const { code } = await second.exited;
  t.not(code, 0);
  const lines = second.stderr.trim().split("\n");
  t.equal(lines.length, 1, `one line: ${second.stderr}`);
  t.match(lines[0], /locked/);
});

t.test("an unreadable database file gives one clear error line", async (t) => {
  const dataDir = await tempDir(t);
  const { writeFile } = await import("node:fs/promises");
  await writeFile(path.join(dataDir, "events.sqlite"), "this is not a database, just text that is long enough to have a header".repeat(20));
  const proc = await spawnServer({ DATA_DIR: dataDir, LANGGRAPH_JSON: TEST_GRAPHS });
  const { code } = await proc.exited;
  t.not(code, 0);
  t.equal(proc.stderr.trim().split("\n").length, 1, proc.stderr);
  t.match(proc.stderr, /agent-server: /);
});

t.test("an invalid environment variable names the variable", async (t) => {
  const dataDir = await tempDir(t);
  const proc = await spawnServer({ DATA_DIR: dataDir, PORT: "not-a-port" });
  const { code } = await proc.exited;
  t.not(code, 0);
  t.match(proc.stderr, /PORT/);
});

t.test("a graph file that cannot be loaded stops the server: one clear line, a non-zero exit", async (t) => {
  const dir = await tempDir(t);
  const { writeFile } = await import("node:fs/promises");
  await writeFile(path.join(dir, "broken.ts"), "export const graph = ;\n");
  await writeFile(path.join(dir, "langgraph.json"), JSON.stringify({ graphs: { broken: "./broken.ts:graph" } }));
  const proc = await spawnServer({ DATA_DIR: path.join(dir, "data"), LANGGRAPH_JSON: path.join(dir, "langgraph.json") });
  const { code } = await proc.exited;
  t.not(code, 0);
  const lines = proc.stderr.trim().split("\n");
  t.equal(lines.length, 1, `one line: ${proc.stderr}`);
  t.match(lines[0], /^agent-server: Graph "broken": /);
  t.notMatch(proc.stdout, /agent-server ready/, "never said it was ready");
});
