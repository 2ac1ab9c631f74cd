/**
 * A2A push notifications end to end: a real server, a real receiver on 127.0.0.1 (the webhook URL
 * policy is relaxed for private and loopback addresses here, as in webhooks-api), raw JSON-RPC and
 * the official @a2a-js/sdk clients of both protocol versions. A push is a webhook delivery: same
 * signature, retries, delivery log, and it survives a restart.
 */
import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { randomUUID } from "node:crypto";
import t from "tap";
import { ClientFactory } from "@a2a-js/sdk/client";
import type { Task } from "@a2a-js/sdk";
import { ClientFactory as ClientFactoryV1 } from "a2a-sdk-v1/client";
import { Role } from "a2a-sdk-v1";
import { A2A_GRAPHS, rpc, textMessage } from "../support/a2a.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { Receiver } from "../support/webhooks.js";
import { verifyWebhook } from "../../src/webhooks/signing.js";
import { a2aPushStream, pushDeliveryKey } from "../../src/domain/a2a-push.js";
import { webhookStream } from "../../src/domain/webhooks.js";
import type { EventStore, RecordedEvent } from "../../src/eventstore/types.js";

const SECRET = "push-secret";

/** The A2A test graphs with a webhooks section that lets pushes reach 127.0.0.1. */
async function pushConfigFile(): Promise<string> {
  const source = JSON.parse(await readFile(A2A_GRAPHS, "utf8")) as { graphs: Record<string, string | { path: string }> };
  const dir = path.dirname(A2A_GRAPHS);
  const absolute = (p: string) => path.join(dir, p);
  const graphs = Object.fromEntries(Object.entries(source.graphs).map(([k, v]) => [k, typeof v === "string" ? absolute(v) : { ...v, path: absolute(v.path) }]));
  const out = path.join(await mkdtemp(path.join(os.tmpdir(), "a2a-push-")), "langgraph.json");
  await writeFile(out, JSON.stringify({ graphs, env: {}, webhooks: { url: { disable_private_ips: false, disable_loopback: false } } }));
  return out;
}

/** The final event (delivered or failed) of a push delivery, awaited on its stream. */
async function pushEnd(store: EventStore, runId: string, configId: string): Promise<RecordedEvent> {
  const sub = store.subscribeToStream(webhookStream(pushDeliveryKey(runId, configId)));
  try {
    for await (const item of sub) {
      if (item.kind === "event" && (item.event.type === "WebhookDelivered" || item.event.type === "WebhookFailed")) return item.event;
    }
  } finally {
    await sub.close();
  }
  throw new Error("subscription ended");
}

const config = await pushConfigFile();
const env = { LANGGRAPH_JSON: config, WEBHOOK_SECRET: SECRET, WEBHOOK_RETRY_BASE_MS: "20", WEBHOOK_RETRY_MAX_MS: "100" };
const s: TestServer = await startTestServer({ env });
t.teardown(() => s.close());
const receiver = await new Receiver().start();
t.teardown(() => receiver.close());
const call = (method: string, params: unknown, headers?: Record<string, string>, assistant = "agent") =>
  rpc(s.url, assistant, { jsonrpc: "2.0", id: 1, method, params }, headers);

t.test("the card says pushNotifications: true", async (t) => {
  const card = (await (await fetch(`${s.url}/.well-known/agent-card.json?assistant_id=agent`)).json()) as { capabilities: Record<string, boolean> };
  t.equal(card.capabilities.pushNotifications, true);
});

t.test("message/send with a pushNotificationConfig: the task is POSTed with the token, signed, and logged", async (t) => {
  const before = receiver.requests.length;
  const res = await call("message/send", {
    message: textMessage("push me"),
    configuration: { pushNotificationConfig: { url: `${receiver.url}/push`, token: "tok-1" } },
  });
  const task = res.json.result;
  t.equal(task.status.state, "completed");
  const got = await receiver.nth(before + 1);
  t.equal(got.method, "POST");
  t.equal(got.url, "/push");
  t.equal(got.headers["x-a2a-notification-token"], "tok-1");
  t.equal(got.headers["content-type"], "application/json");
  const ts = got.headers["x-webhook-timestamp"] as string;
  t.ok(verifyWebhook(SECRET, ts, got.body, got.headers["x-webhook-signature"] as string), "signed with WEBHOOK_SECRET");
  const body = JSON.parse(got.body);
  t.match(body, { kind: "task", id: task.id, contextId: task.contextId, status: { state: "completed" } }, "the v0.3 Task");
  t.equal(body.artifacts[0].parts[0].text, "You said: push me");
  t.equal((await pushEnd(s.server.store, task.id, task.id)).type, "WebhookDelivered");
  // The config is kept under the task's id (no id given), and the delivery log shows the push.
  const get = await call("tasks/pushNotificationConfig/get", { id: task.id });
  t.same(get.json.result, { taskId: task.id, pushNotificationConfig: { id: task.id, url: `${receiver.url}/push`, token: "tok-1" } });
  const log = (await (await fetch(`${s.url}/runs/${task.id}/webhooks`)).json()) as unknown[];
  t.match(log, [
    {
      event: "attempt",
      attempt: 1,
      status_code: 200,
      outcome: "delivered",
      delivery_id: got.headers["x-webhook-id"],
      a2a_push: { task_id: task.id, config_id: task.id },
    },
    { event: "delivered", attempts: 1, a2a_push: { task_id: task.id } },
  ]);
});

t.test("set/get/list/delete round trip (raw v0.3 and v1.0); errors", async (t) => {
  const task = (await call("message/send", { message: textMessage("configs") })).json.result;
  const set = await call("tasks/pushNotificationConfig/set", {
    taskId: task.id,
    pushNotificationConfig: { id: "cfg-a", url: `${receiver.url}/a`, token: "ta", authentication: { schemes: ["Bearer"], credentials: "secret-a" } },
  });
  t.same(set.json.result, {
    taskId: task.id,
    pushNotificationConfig: { id: "cfg-a", url: `${receiver.url}/a`, token: "ta", authentication: { schemes: ["Bearer"], credentials: "secret-a" } },
  });
  const v1 = await call("CreateTaskPushNotificationConfig", {
    taskId: task.id,
    id: "cfg-b",
    url: `${receiver.url}/b`,
    authentication: { scheme: "Basic", credentials: "dTpw" },
  });
  t.same(v1.json.result, { taskId: task.id, id: "cfg-b", url: `${receiver.url}/b`, authentication: { scheme: "Basic", credentials: "dTpw" } });
  t.same(
    (await call("tasks/pushNotificationConfig/get", { id: task.id, pushNotificationConfigId: "cfg-b" })).json.result.pushNotificationConfig.authentication,
    {
      schemes: ["Basic"],
      credentials: "dTpw",
    },
  );
  const list = await call("tasks/pushNotificationConfig/list", { id: task.id });
  t.same(
    list.json.result.map((c: { pushNotificationConfig: { id: string } }) => c.pushNotificationConfig.id),
    ["cfg-a", "cfg-b"],
  );
  const listV1 = await call("ListTaskPushNotificationConfigs", { taskId: task.id });
  t.same(
    listV1.json.result.configs.map((c: { id: string }) => c.id),
    ["cfg-a", "cfg-b"],
  );
  t.equal(listV1.json.result.nextPageToken, "");
  t.same((await call("GetTaskPushNotificationConfig", { taskId: task.id, id: "cfg-a" })).json.result.authentication, {
    scheme: "Bearer",
    credentials: "secret-a",
  });
  t.same((await call("tasks/pushNotificationConfig/delete", { id: task.id, pushNotificationConfigId: "cfg-a" })).json, { jsonrpc: "2.0", id: 1, result: null });
  t.same((await call("DeleteTaskPushNotificationConfig", { taskId: task.id, id: "cfg-b" })).json.result, null);
  t.same((await call("tasks/pushNotificationConfig/list", { id: task.id })).json.result, [], "both deleted");
  t.same((await call("tasks/pushNotificationConfig/delete", { id: task.id, pushNotificationConfigId: "cfg-a" })).json.result, null, "deleting again is fine");

  const missing = await call("tasks/pushNotificationConfig/get", { id: task.id, pushNotificationConfigId: "nope" });
  t.equal(missing.json.error.code, -32602);
  t.match(missing.json.error.message, /nope/);
  const unknown = randomUUID();
  for (const [method, params] of [
    ["tasks/pushNotificationConfig/set", { taskId: unknown, pushNotificationConfig: { url: `${receiver.url}/x` } }],
    ["tasks/pushNotificationConfig/get", { id: unknown }],
    ["tasks/pushNotificationConfig/list", { id: unknown }],
    ["tasks/pushNotificationConfig/delete", { id: unknown, pushNotificationConfigId: "x" }],
    ["CreateTaskPushNotificationConfig", { taskId: unknown, url: `${receiver.url}/x` }],
  ] as const) {
    t.equal((await call(method, params)).json.error.code, -32001, `${method}: unknown task`);
  }
  const noUrl = await call("tasks/pushNotificationConfig/set", { taskId: task.id, pushNotificationConfig: { token: "x" } });
  t.equal(noUrl.json.error.code, -32602);
  t.match(noUrl.json.error.message, /params\.pushNotificationConfig\.url/);
  const metadataUrl = await call("tasks/pushNotificationConfig/set", { taskId: task.id, pushNotificationConfig: { url: "http://169.254.169.254/latest" } });
  t.equal(metadataUrl.json.error.code, -32602, "the URL policy's refusal");
  t.match(metadataUrl.json.error.message, /metadata/);
});

t.test("input-required and then completed: one push per state, Authorization from the config", async (t) => {
  const before = receiver.requests.length;
  const asked = (
    await call(
      "message/send",
      {
        message: textMessage("start"),
        configuration: { pushNotificationConfig: { id: "hitl", url: `${receiver.url}/hitl`, authentication: { schemes: ["Bearer"], credentials: "abc" } } },
      },
      {},
      "interrupt",
    )
  ).json.result;
  t.equal(asked.status.state, "input-required");
  const first = await receiver.nth(before + 1);
  t.equal(JSON.parse(first.body).status.state, "input-required");
  t.equal(first.headers.authorization, "Bearer abc");
  const answered = (await call("message/send", { message: textMessage("yes", { taskId: asked.id }) }, {}, "interrupt")).json.result;
  t.equal(answered.status.state, "completed");
  const second = await receiver.nth(before + 2);
  const body = JSON.parse(second.body);
  t.match(body, { id: asked.id, status: { state: "completed" } }, "the continuation's end is the same task's");
  t.not(second.headers["x-webhook-id"], first.headers["x-webhook-id"], "two deliveries");
});

t.test("a 500 is retried with the same delivery id", async (t) => {
  const before = receiver.requests.length;
  receiver.script.push({ status: 500 });
  const task = (
    await call("message/send", { message: textMessage("retry"), configuration: { pushNotificationConfig: { id: "r", url: `${receiver.url}/retry` } } })
  ).json.result;
  const [a, b] = [await receiver.nth(before + 1), await receiver.nth(before + 2)];
  t.equal(a.headers["x-webhook-id"], b.headers["x-webhook-id"]);
  t.equal((await pushEnd(s.server.store, task.id, "r")).type, "WebhookDelivered");
  const log = (await (await fetch(`${s.url}/runs/${task.id}/webhooks`)).json()) as { event: string; outcome?: string; status_code?: number }[];
  t.match(log, [
    { event: "attempt", status_code: 500, outcome: "retry" },
    { event: "attempt", status_code: 200, outcome: "delivered" },
    { event: "delivered", attempts: 2 },
  ]);
});

t.test("purging the context's thread removes its push configs and push delivery logs from the log", async (t) => {
  const task = (
    await call("message/send", {
      message: textMessage("forget my push"),
      configuration: { pushNotificationConfig: { id: "gone", url: `${receiver.url}/purged-receiver`, token: "purge-secret" } },
    })
  ).json.result;
  t.equal((await pushEnd(s.server.store, task.id, "gone")).type, "WebhookDelivered");
  const streams = [a2aPushStream(task.id), webhookStream(pushDeliveryKey(task.id, "gone"))];
  const text = async (stream: string) => JSON.stringify((await s.server.store.readStream(stream)).map((e) => ({ type: e.type, data: e.data })));
  t.ok((await text(streams[0])).includes("purge-secret"), "the config stream holds the token before");
  t.ok(
    (await s.server.store.readStream(streams[1])).some((e) => e.type === "WebhookDelivered"),
    "the push delivery log holds the delivery before",
  );
  t.equal((await fetch(`${s.url}/threads/${task.contextId}?purge=true`, { method: "DELETE" })).status, 204);
  for (const stream of streams) {
    const left = await s.server.store.readStream(stream);
    t.ok(left.length > 0 && left.every((e) => e.type === "EventPurged"), `${stream}: only tombstones left`);
    t.notOk((await text(stream)).includes("purge-secret") || (await text(stream)).includes("purged-receiver"), `${stream}: no token, no URL`);
  }
  const got = await call("tasks/get", { id: task.id });
  t.equal(got.json.error?.code, -32001, "the task is gone");
});

t.test("a push due while the server was down is sent after the restart", async (t) => {
  // The receiver is down: the first attempt fails and a retry is due after a long backoff.
  const down = await new Receiver().start();
  const port = down.port;
  await down.close();
  const slow = await startTestServer({ env: { ...env, WEBHOOK_RETRY_BASE_MS: "300", WEBHOOK_RETRY_MAX_MS: "300" } });
  let restarted: TestServer | undefined;
  t.teardown(async () => {
    await (restarted ?? slow).close();
  });
  const task = (
    await rpc(slow.url, "agent", {
      jsonrpc: "2.0",
      id: 1,
      method: "message/send",
      params: { message: textMessage("later"), configuration: { pushNotificationConfig: { id: "later", url: `http://127.0.0.1:${port}/later` } } },
    })
  ).json.result;
  const key = pushDeliveryKey(task.id, "later");
  // Wait for the failed first attempt in the log, then stop the server before the retry.
  const sub = slow.server.store.subscribeToStream(webhookStream(key));
  for await (const item of sub) if (item.kind === "event" && item.event.type === "WebhookAttempted") break;
  await sub.close();
  await slow.server.close();
  // Only now does the receiver listen: whatever it gets was sent by the restarted server.
  const back = await new Receiver().start(port);
  t.teardown(() => back.close());
  restarted = await startTestServer({ env, dataDir: slow.dataDir });
  const got = await back.nth(1);
  t.match(JSON.parse(got.body), { id: task.id, status: { state: "completed" } });
  t.equal((await pushEnd(restarted.server.store, task.id, "later")).type, "WebhookDelivered");
  const log = (await (await fetch(`${restarted.url}/runs/${task.id}/webhooks`)).json()) as { event: string; outcome?: string; owner?: string }[];
  t.match(log, [{ event: "attempt", outcome: "retry", error: /ECONNREFUSED/ }, { event: "attempt", outcome: "delivered" }, { event: "delivered" }]);
  t.not(log[0].owner, log[1].owner, "sent again by the new process");
});

t.test("a config set on a task waiting for input: the run that resumes it is pushed", async (t) => {
  const asked = (await call("message/send", { message: textMessage("start") }, {}, "interrupt")).json.result;
  t.equal(asked.status.state, "input-required");
  const before = receiver.requests.length;
  const set = await call(
    "tasks/pushNotificationConfig/set",
    { taskId: asked.id, pushNotificationConfig: { id: "late", url: `${receiver.url}/late` } },
    {},
    "interrupt",
  );
  t.equal(set.json.result.pushNotificationConfig.id, "late");
  const answered = (await call("message/send", { message: textMessage("ok", { taskId: asked.id }) }, {}, "interrupt")).json.result;
  t.equal(answered.status.state, "completed");
  const got = await receiver.nth(before + 1);
  t.equal(got.url, "/late");
  t.match(JSON.parse(got.body), { id: asked.id, status: { state: "completed" } });
});

t.test("with http.disable_webhooks: -32003 and the card says pushNotifications: false", async (t) => {
  const file = path.join(await mkdtemp(path.join(os.tmpdir(), "a2a-push-off-")), "langgraph.json");
  const base = JSON.parse(await readFile(config, "utf8")) as Record<string, unknown>;
  await writeFile(file, JSON.stringify({ ...base, http: { disable_webhooks: true } }));
  const off = await startTestServer({ env: { LANGGRAPH_JSON: file } });
  t.teardown(() => off.close());
  const card = (await (await fetch(`${off.url}/.well-known/agent-card.json?assistant_id=agent`)).json()) as { capabilities: Record<string, boolean> };
  t.equal(card.capabilities.pushNotifications, false);
  const offCall = (method: string, params: unknown) => rpc(off.url, "agent", { jsonrpc: "2.0", id: 1, method, params });
  const task = (await offCall("message/send", { message: textMessage("no push") })).json.result;
  t.equal((await offCall("tasks/pushNotificationConfig/list", { id: task.id })).json.error.code, -32003);
  t.equal(
    (await offCall("tasks/pushNotificationConfig/set", { taskId: task.id, pushNotificationConfig: { url: `${receiver.url}/x` } })).json.error.code,
    -32003,
  );
  const v1 = await offCall("GetTaskPushNotificationConfig", { taskId: task.id, id: "x" });
  t.match(v1.json.error, { code: -32003, data: [{ reason: "PUSH_NOTIFICATION_NOT_SUPPORTED" }] });
  const send = await offCall("message/send", { message: textMessage("push?"), configuration: { pushNotificationConfig: { url: `${receiver.url}/x` } } });
  t.equal(send.json.error.code, -32003);
});

t.test("@a2a-js/sdk 0.3 client: set, get, list, delete", async (t) => {
  const client = await new ClientFactory().createFromUrl(`${s.url}/.well-known/agent-card.json?assistant_id=agent`, "");
  const task = (await client.sendMessage({ message: textMessage("sdk") })) as Task;
  const set = await client.setTaskPushNotificationConfig({ taskId: task.id, pushNotificationConfig: { id: "sdk", url: `${receiver.url}/sdk`, token: "t" } });
  t.same(set, { taskId: task.id, pushNotificationConfig: { id: "sdk", url: `${receiver.url}/sdk`, token: "t" } });
  // This client names only the task: its one config answers.
  t.same(await client.getTaskPushNotificationConfig({ id: task.id }), set);
  t.same(await client.listTaskPushNotificationConfig({ id: task.id }), [set]);
  await client.deleteTaskPushNotificationConfig({ id: task.id, pushNotificationConfigId: "sdk" });
  t.same(await client.listTaskPushNotificationConfig({ id: task.id }), []);
});

t.test("@a2a-js/sdk 1.x client: create, get, list, delete; a push set in SendMessage is a StreamResponse", async (t) => {
  const client = await new ClientFactoryV1().createFromUrl(`${s.url}/.well-known/agent-card.json?assistant_id=agent`, "");
  const before = receiver.requests.length;
  const sent = await client.sendMessage({
    tenant: "",
    message: {
      messageId: randomUUID(),
      contextId: "",
      taskId: "",
      role: Role.ROLE_USER,
      parts: [{ content: { $case: "text", value: "v1 push" }, metadata: undefined, filename: "", mediaType: "" }],
      metadata: undefined,
      extensions: [],
      referenceTaskIds: [],
    },
    configuration: {
      acceptedOutputModes: [],
      taskPushNotificationConfig: { tenant: "", id: "v1", taskId: "", url: `${receiver.url}/v1`, token: "tv1", authentication: undefined },
      historyLength: undefined,
      returnImmediately: false,
    },
    metadata: undefined,
  });
  const taskId = (sent as { id: string }).id;
  const got = await receiver.nth(before + 1);
  t.equal(got.headers["x-a2a-notification-token"], "tv1");
  t.match(JSON.parse(got.body), { task: { id: taskId, status: { state: "TASK_STATE_COMPLETED" } } }, "v1.0: StreamResponse {task}");
  const created = await client.createTaskPushNotificationConfig({
    tenant: "",
    id: "v1b",
    taskId,
    url: `${receiver.url}/v1b`,
    token: "",
    authentication: undefined,
  });
  t.match(created, { id: "v1b", taskId, url: `${receiver.url}/v1b` });
  t.match(await client.getTaskPushNotificationConfig({ tenant: "", taskId, id: "v1" }), { id: "v1", token: "tv1" });
  const listed = await client.listTaskPushNotificationConfig({ tenant: "", taskId, pageSize: 0, pageToken: "" });
  t.same(
    listed.configs.map((c) => c.id),
    ["v1", "v1b"],
  );
  await client.deleteTaskPushNotificationConfig({ tenant: "", taskId, id: "v1b" });
  t.same(
    (await client.listTaskPushNotificationConfig({ tenant: "", taskId, pageSize: 0, pageToken: "" })).configs.map((c) => c.id),
    ["v1"],
  );
});
