/**
 * The pure parts of A2A push: the headers a config gives, and the fold into the webhooks tables
 * (configs, run links, one delivery per config when a linked run ends), without I/O.
 */
import t from "tap";
import Database from "better-sqlite3";
import { pushDeliveryKey, pushHeaders, TASK_ID_KEY } from "../../src/domain/a2a-push.js";
import { deliveryIdOf, deliveryKey } from "../../src/domain/webhooks.js";
import { webhooksTable, WebhooksReadModel } from "../../src/read-models/webhooks.js";
import { schemaForEventType } from "../../src/domain/events.js";
import type { RecordedEvent } from "../../src/eventstore/types.js";

t.test("headers: token, and Authorization for Bearer or Basic with credentials", async (t) => {
  t.same(pushHeaders({ task_id: "t", config_id: "c", protocol: "0.3" }), {});
  t.same(pushHeaders({ task_id: "t", config_id: "c", protocol: "0.3", token: "tok" }), { "x-a2a-notification-token": "tok" });
  t.same(pushHeaders({ task_id: "t", config_id: "c", protocol: "1.0", authentication: { schemes: ["bearer"], credentials: "abc" } }), {
    authorization: "Bearer abc",
  });
  t.same(pushHeaders({ task_id: "t", config_id: "c", protocol: "0.3", authentication: { schemes: ["OAuth2", "Basic"], credentials: "dTpw" } }), {
    authorization: "Basic dTpw",
  });
  t.same(pushHeaders({ task_id: "t", config_id: "c", protocol: "0.3", authentication: { schemes: ["Bearer"] } }), {}, "no credentials, no header");
});

t.test("the events match their schemas", async (t) => {
  t.ok(
    schemaForEventType("A2APushConfigSet")!.safeParse({
      task_id: "t",
      run_id: "r",
      protocol: "0.3",
      config: { id: "c", url: "https://x.test/" },
      set_at: "now",
    }).success,
  );
  t.notOk(
    schemaForEventType("A2APushConfigSet")!.safeParse({
      task_id: "t",
      run_id: "r",
      protocol: "2.0",
      config: { id: "c", url: "https://x.test/" },
      set_at: "now",
    }).success,
  );
  t.ok(schemaForEventType("A2APushConfigDeleted")!.safeParse({ task_id: "t", config_id: "c", deleted_at: "now" }).success);
});

t.test("fold: configs, links, one delivery per config when a linked run ends", async (t) => {
  const db = new Database(":memory:");
  for (const ddl of webhooksTable.ddl) db.exec(ddl);
  const apply = webhooksTable.prepare(db) as (event: RecordedEvent) => void;
  const model = new WebhooksReadModel(db);
  let position = 0n;
  const ev = (streamId: string, type: string, data: unknown): RecordedEvent => ({
    streamId,
    id: String(position),
    type,
    revision: 0n,
    position: position++,
    data,
    metadata: {},
    created: new Date(0),
  });
  const enqueued = (runId: string, metadata: Record<string, unknown> = {}) =>
    ev("thread-ctx", "RunEnqueued", {
      run: {
        run_id: runId,
        thread_id: "ctx",
        assistant_id: "a",
        metadata,
        kwargs: {},
        created_at: "",
        updated_at: "",
        status: "pending",
        multitask_strategy: "enqueue",
      },
      thread_metadata: {},
    });
  const ended = (runId: string, status: string, at: number) => ev(`run-${runId}`, "RunEnded", { status, ended_at: new Date(at).toISOString() });
  const set = (id: string, runId: string, protocol = "0.3") =>
    ev("a2a-push-task1", "A2APushConfigSet", {
      task_id: "task1",
      run_id: runId,
      protocol,
      config: { id, url: `https://r.test/${id}`, token: `tok-${id}` },
      set_at: "",
    });

  // A run ending before any config is set: nothing to push.
  apply(enqueued("other"));
  apply(ended("other", "success", 1000));
  t.equal(db.prepare("SELECT count(*) FROM webhook_deliveries").pluck().get(), 0);

  apply(set("c1", "task1"));
  apply(enqueued("task1"));
  apply(set("c2", "task1", "1.0"));
  t.same(
    model.pushConfigs("task1").map((c) => [c.id, c.protocol]),
    [
      ["c1", "0.3"],
      ["c2", "1.0"],
    ],
  );
  apply(ended("task1", "interrupted", 2000));
  const first = model.pushesOfRun("task1");
  t.same(
    first.map((d) => deliveryKey(d)),
    [pushDeliveryKey("task1", "c1"), pushDeliveryKey("task1", "c2")],
  );
  t.match(first[0], { status: "due", due_at: 2000, url: "https://r.test/c1", push: { task_id: "task1", config_id: "c1", token: "tok-c1", protocol: "0.3" } });
  t.same(
    model.due(2000, 10).map((d) => d.push?.config_id),
    ["c1", "c2"],
    "due through the same index as run webhooks",
  );
  t.not(deliveryIdOf(deliveryKey(first[0])), deliveryIdOf(deliveryKey(first[1])));

  // The task continues in another run (its metadata names the task): linked, and notified with the configs it has then.
  apply(ev("a2a-push-task1", "A2APushConfigDeleted", { task_id: "task1", config_id: "c1", deleted_at: "" }));
  apply(enqueued("run2", { [TASK_ID_KEY]: "task1" }));
  apply(ended("run2", "success", 3000));
  t.same(
    model.pushesOfRun("run2").map((d) => [d.push?.task_id, d.push?.config_id]),
    [["task1", "c2"]],
  );
  // A run continuing a task that never had a config is not linked.
  apply(enqueued("run3", { [TASK_ID_KEY]: "task9" }));
  apply(ended("run3", "success", 4000));
  t.same(model.pushesOfRun("run3"), []);
  // A set that saw its run running, whose end reached the log first, catches that end up.
  apply(set("c3", "run4"));
  apply(
    ev("a2a-push-task1", "A2APushRunEndCaughtUp", {
      task_id: "task1",
      run_id: "run4",
      config_id: "c3",
      ended: { status: "success", ended_at: new Date(5000).toISOString() },
    }),
  );
  t.match(model.pushesOfRun("run4"), [{ status: "due", due_at: 5000, push: { task_id: "task1", config_id: "c3" } }]);
  apply(
    ev("a2a-push-task1", "A2APushRunEndCaughtUp", {
      task_id: "task1",
      run_id: "run4",
      config_id: "c3",
      ended: { status: "success", ended_at: new Date(6000).toISOString() },
    }),
  );
  t.equal(model.pushesOfRun("run4").length, 1, "caught up once");
  // The delivery's attempts fold as a run webhook's do.
  const key = pushDeliveryKey("run2", "c2");
  apply({
    ...ev(`webhook-${key}`, "WebhookAttempted", {
      owner: "o",
      attempt: 1,
      delivery_id: "x",
      started_at: "",
      duration_ms: 1,
      status_code: 200,
      outcome: "delivered",
    }),
    revision: 0n,
  });
  apply({ ...ev(`webhook-${key}`, "WebhookDelivered", { attempts: 1, delivered_at: "" }), revision: 1n });
  t.match(model.get(key), { status: "delivered", revision: 1n });
});
