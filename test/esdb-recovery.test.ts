import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import t, { type Test } from "tap";
import { startEsdbTestDouble } from "./support/esdb-test-double.js";
import { startTcpProxy, type TcpProxy } from "./support/tcp-proxy.js";
import { spawnServer, type ServerProcess } from "./support/process.js";
import { TEST_GRAPHS } from "./support/server.js";

/**
 * Connection loss between a server process and EventStoreDB (the test double), through a TCP proxy
 * that resets every connection and refuses new ones for a while. The server must say it is not
 * healthy while cut, answer 503 + Retry-After (never 500, never hang) to what needs the log, and
 * serve again within seconds of the heal, with nothing missed or repeated.
 */

const human = (content: string) => ({ role: "user", content });

interface Rig {
  proxy: TcpProxy;
  proc: ServerProcess;
  url: string;
}

async function startRig(t: Test, env: Record<string, string> = {}): Promise<Rig> {
  const esdb = await startEsdbTestDouble();
  t.teardown(() => esdb.close());
  const esdbPort = Number(new URL(esdb.connectionString.replace(/^esdb:/, "http:")).port);
  const proxy = await startTcpProxy({ port: esdbPort });
  t.teardown(() => proxy.close());
  const dataDir = await mkdtemp(path.join(os.tmpdir(), "agent-server-esdb-recovery-"));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const proc = await spawnServer({
    EVENTSTORE_URL: `esdb://127.0.0.1:${proxy.port}?tls=false`,
    LANGGRAPH_JSON: TEST_GRAPHS,
    DATA_DIR: dataDir,
    ...env,
  });
  t.teardown(async () => {
    if (proc.child.exitCode === null && proc.child.signalCode === null) proc.child.kill("SIGTERM");
    await proc.exited;
  });
  if (!proc.url) throw new Error(`server did not start: ${proc.stderr}`);
  return { proxy, proc, url: proc.url };
}

async function post(url: string, body: unknown): Promise<Response> {
  return fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
}

/** Polls `check` until it returns true or `ms` passed; resolves with the milliseconds it took. */
async function within(ms: number, what: string, check: () => Promise<boolean>): Promise<number> {
  const started = Date.now();
  for (;;) {
    if (await check().catch(() => false)) return Date.now() - started;
    if (Date.now() - started > ms) throw new Error(`not within ${ms} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** One thread created, read back and run to the end with runs/wait: every step must succeed. */
async function roundTrip(url: string, label: string): Promise<void> {
  const created = await post(`${url}/threads`, { metadata: { label } });
  if (created.status !== 200) throw new Error(`POST /threads → ${created.status} ${await created.text()}`);
  const thread = (await created.json()) as { thread_id: string };
  const read = await fetch(`${url}/threads/${thread.thread_id}`);
  if (read.status !== 200) throw new Error(`GET /threads/{id} → ${read.status}`);
  const waited = await post(`${url}/threads/${thread.thread_id}/runs/wait`, { assistant_id: "agent", input: { messages: [human(label)] } });
  if (waited.status !== 200) throw new Error(`runs/wait → ${waited.status} ${await waited.text()}`);
  const values = (await waited.json()) as { messages?: unknown[] };
  if (values.messages?.length !== 2) throw new Error(`runs/wait answered ${JSON.stringify(values)}`);
}

async function outage(t: Test, cutMs: number) {
  const rig = await startRig(t);
  await roundTrip(rig.url, "before");
  t.equal((await fetch(`${rig.url}/ok`)).status, 200, "healthy before the cut");

  rig.proxy.cut();
  const cutAt = Date.now();
  const noticed = await within(5_000, "/ok non-200 while cut", async () => (await fetch(`${rig.url}/ok`)).status !== 200);
  t.ok(noticed <= 5_000, `/ok said not ok ${noticed} ms after the cut`);
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, cutMs - (Date.now() - cutAt))));
  rig.proxy.heal();

  const recovered = await within(5_000, "round trip after the heal", async () => {
    await roundTrip(rig.url, "after");
    return true;
  });
  t.ok(recovered <= 5_000, `served again ${recovered} ms after the heal`);
  for (let i = 0; i < 5; i++) await roundTrip(rig.url, `again ${i}`);
  t.pass("keeps succeeding");
  t.equal((await fetch(`${rig.url}/ok`)).status, 200, "healthy again");
}

t.test("a 3 s cut: /ok says so, and the server serves again within 5 s of the heal", async (t) => {
  await outage(t, 3_000);
});
