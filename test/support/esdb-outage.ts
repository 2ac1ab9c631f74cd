/**
 * Connection loss between a server process and EventStoreDB (the test double), through a TCP proxy
 * that resets every connection and refuses new ones for a while: the rig and the checks that
 * test/esdb-recovery*.test.ts share.
 */
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { Test } from "tap";
import { startEsdbTestDouble, type EsdbTestDouble, type EsdbTestDoubleOptions } from "./esdb-test-double.js";
import { startTcpProxy, type TcpProxy } from "./tcp-proxy.js";
import { spawnServer, type ServerProcess } from "./process.js";
import { TEST_GRAPHS } from "./server.js";

export const human = (content: string) => ({ role: "user", content });

export interface Rig {
  /** The double itself (a test reads the log through its own connection, which the proxy does not cut). */
  esdb: EsdbTestDouble;
  proxy: TcpProxy;
  proc: ServerProcess;
  url: string;
}

export async function startRig(t: Test, env: Record<string, string> = {}, double: EsdbTestDoubleOptions = {}): Promise<Rig> {
  const esdb = await startEsdbTestDouble(double);
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
  return { esdb, proxy, proc, url: proc.url };
}

export async function post(url: string, body: unknown): Promise<Response> {
  return fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
}

/** Polls `check` until it returns true or `ms` passed; resolves with the milliseconds it took. */
export async function within(ms: number, what: string, check: () => Promise<boolean>): Promise<number> {
  const started = Date.now();
  for (;;) {
    if (await check().catch(() => false)) return Date.now() - started;
    if (Date.now() - started > ms) throw new Error(`not within ${ms} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** One thread created, read back and run to the end with runs/wait: every step must succeed. */
export async function roundTrip(url: string, label: string): Promise<void> {
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

export async function json<T>(res: Response | Promise<Response>): Promise<T> {
  return (await (await res).json()) as T;
}

interface LogInfo {
  connection: string;
  reconnects: number;
  subscriptions: { name: string; state: string; lag?: string; resubscribes: number }[];
}

/** A request that needs the log answers 503 with Retry-After within about its deadline: never 500, never a hang. */
async function expectUnavailable(t: Test, what: string, send: () => Promise<Response>, deadlineMs: number): Promise<void> {
  const started = Date.now();
  const res = await send();
  const took = Date.now() - started;
  const body = (await res.json()) as { detail?: string };
  t.equal(res.status, 503, `${what} during the outage → 503 (${body.detail})`);
  t.match(res.headers.get("retry-after") ?? "", /^\d+$/, `${what}: Retry-After in seconds`);
  t.ok(took <= deadlineMs + 2_000, `${what}: answered in ${took} ms (deadline ${deadlineMs} ms)`);
}

const DEADLINE_MS = 2_000;

export async function outage(t: Test, cutMs: number) {
  const rig = await startRig(t, { EVENTSTORE_DEADLINE_MS: String(DEADLINE_MS) });
  await roundTrip(rig.url, "before");
  t.same(await json(fetch(`${rig.url}/ok`)), { ok: true }, "healthy before the cut");
  const before = (await json<{ log: LogInfo }>(fetch(`${rig.url}/info`))).log;
  t.equal(before.connection, "connected");
  t.match(before.subscriptions, [{ name: "read-models", state: "live", lag: "0" }], "/info: the read models' subscription is live, no lag");
  const thread = await json<{ thread_id: string }>(post(`${rig.url}/threads`, {}));

  rig.proxy.cut();
  const cutAt = Date.now();
  const noticed = await within(5_000, "/ok non-200 while cut", async () => (await fetch(`${rig.url}/ok`)).status !== 200);
  t.ok(noticed <= 5_000, `/ok said not ok ${noticed} ms after the cut`);
  const down = await fetch(`${rig.url}/ok`);
  const downBody = (await down.json()) as { ok: boolean; reason?: string };
  t.equal(down.status, 503);
  t.equal(downBody.ok, false);
  t.match(downBody.reason, /unreachable|reconnecting/, `/ok says why: ${downBody.reason}`);
  const info = (await json<{ log: LogInfo }>(fetch(`${rig.url}/info`))).log;
  t.equal(info.connection, "disconnected", "/info: disconnected");
  t.match(await (await fetch(`${rig.url}/metrics`)).text(), /^agent_server_log_connected 0$/m, "/metrics: not connected");

  await expectUnavailable(t, "POST /threads", () => post(`${rig.url}/threads`, {}), DEADLINE_MS);
  await expectUnavailable(
    t,
    "runs/wait",
    () => post(`${rig.url}/threads/${thread.thread_id}/runs/wait`, { assistant_id: "agent", input: { messages: [human("x")] } }),
    DEADLINE_MS,
  );
  t.equal((await fetch(`${rig.url}/threads/${thread.thread_id}`)).status, 200, "reads of the read models are still served");

  await new Promise((resolve) => setTimeout(resolve, Math.max(0, cutMs - (Date.now() - cutAt))));
  t.not((await fetch(`${rig.url}/ok`)).status, 200, "still not ok at the end of the cut");
  rig.proxy.heal();

  const recovered = await within(5_000, "round trip after the heal", async () => {
    await roundTrip(rig.url, "after");
    return true;
  });
  t.ok(recovered <= 5_000, `served again ${recovered} ms after the heal`);
  for (let i = 0; i < 5; i++) await roundTrip(rig.url, `again ${i}`);
  t.pass("keeps succeeding");
  await within(5_000, "/ok 200 again", async () => (await fetch(`${rig.url}/ok`)).status === 200);
  const after = (await json<{ log: LogInfo }>(fetch(`${rig.url}/info`))).log;
  t.equal(after.connection, "connected");
  t.ok(after.reconnects >= 1, `/info: ${after.reconnects} reconnect(s)`);
  t.match(after.subscriptions, [{ name: "read-models", state: "live" }]);
  t.ok(after.subscriptions.find((s) => s.name === "read-models")!.resubscribes >= 1, "the read models re-subscribed");
  const metrics = await (await fetch(`${rig.url}/metrics`)).text();
  t.match(metrics, /^agent_server_log_connected 1$/m, "/metrics: connected");
  t.match(metrics, /^agent_server_log_reconnects_total [1-9]\d*$/m, "/metrics: reconnects counted");
  t.match(metrics, /^agent_server_subscription_lag_positions\{subscription="read-models"\} \d+$/m, "/metrics: the read models' lag");
}
