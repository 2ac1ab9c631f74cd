import type Database from "better-sqlite3";
import type { RecordedEvent } from "../eventstore/types.js";
import type { TableProjection } from "./table.js";
import { a2aPush, webhookDeliveries } from "../../projections/webhooks.js";
import { deliveryKey, type Delivery } from "../domain/webhooks.js";
import { isEvent } from "../domain/event-of.js";
import { A2A_PUSH_STREAM_PREFIX, type A2APushEvent, type StoredPushConfig } from "../domain/a2a-push.js";

/**
 * Webhook deliveries, one row per delivery (a run created with a webhook, keyed by its run id; an
 * A2A push notification, keyed by pushDeliveryKey): its state, when its next attempt is due (or
 * its claim lapses), and the folded delivery as JSON. The dispatcher asks for due rows through the
 * partial index; nothing is kept in memory. Beside them, the A2A push configs of each task and
 * the runs linked to a task that has configs.
 */
export const webhooksTable: TableProjection = {
  name: webhookDeliveries.name,
  // 3: a thread's purge drops the deliveries and push configs of its runs (they hold the runs).
  version: 3,
  ddl: [
    `CREATE TABLE webhook_deliveries (
       id TEXT PRIMARY KEY,
       run_id TEXT NOT NULL,
       kind TEXT NOT NULL,
       status TEXT NOT NULL,
       due_at INTEGER,
       doc TEXT NOT NULL
     )`,
    "CREATE INDEX webhook_deliveries_due ON webhook_deliveries (due_at) WHERE status IN ('due', 'sending')",
    "CREATE INDEX webhook_deliveries_run ON webhook_deliveries (run_id)",
    "CREATE TABLE a2a_push_configs (task_id TEXT NOT NULL, config_id TEXT NOT NULL, doc TEXT NOT NULL, PRIMARY KEY (task_id, config_id))",
    "CREATE TABLE a2a_push_runs (run_id TEXT PRIMARY KEY, task_id TEXT NOT NULL)",
    "CREATE INDEX a2a_push_runs_task ON a2a_push_runs (task_id)",
  ],
  streamPrefixes: webhookDeliveries.streamPrefixes,
  eventTypes: [...webhookDeliveries.eventTypes, "ThreadPurged"],
  prepare(db) {
    const forgetRuns = forgetPurgedRuns(db);
    const find = findDelivery(db);
    const upsert = db.prepare(`INSERT INTO webhook_deliveries (id, run_id, kind, status, due_at, doc) VALUES (@id, @run_id, @kind, @status, @due_at, @doc)
      ON CONFLICT (id) DO UPDATE SET status = excluded.status, due_at = excluded.due_at, doc = excluded.doc`);
    const write = (d: Delivery) =>
      upsert.run({ id: deliveryKey(d), run_id: d.run_id, kind: d.push ? "a2a-push" : "run", status: d.status, due_at: d.due_at, doc: encodeDelivery(d) });
    const setConfig = db.prepare(`INSERT INTO a2a_push_configs (task_id, config_id, doc) VALUES (?, ?, ?)
      ON CONFLICT (task_id, config_id) DO UPDATE SET doc = excluded.doc`);
    const deleteConfig = db.prepare("DELETE FROM a2a_push_configs WHERE task_id = ? AND config_id = ?");
    const link = db.prepare("INSERT INTO a2a_push_runs (run_id, task_id) VALUES (?, ?) ON CONFLICT (run_id) DO NOTHING");
    const linked = db.prepare("SELECT task_id FROM a2a_push_runs WHERE run_id = ?").pluck();
    const taskLinked = db.prepare("SELECT 1 FROM a2a_push_runs WHERE task_id = ? LIMIT 1").pluck();
    const configs = pushConfigsOf(db);
    const applyPush = (event: RecordedEvent) => {
      const e = { type: event.type, data: event.data } as A2APushEvent;
      if (e.type === "A2APushConfigSet") {
        const stored: StoredPushConfig = { ...e.data.config, protocol: e.data.protocol };
        setConfig.run(e.data.task_id, e.data.config.id, JSON.stringify(stored));
        link.run(e.data.run_id, e.data.task_id);
      } else if (e.type === "A2APushConfigDeleted") {
        deleteConfig.run(e.data.task_id, e.data.config_id);
      } else if (e.type === "A2APushRunEndCaughtUp") {
        const config = configs(e.data.task_id).find((c) => c.id === e.data.config_id);
        const d = config && a2aPush.deliveriesOnEnd(e.data.run_id, e.data.task_id, [config], e.data.ended)[0];
        if (d && !find(deliveryKey(d))) write(d);
      }
    };
    return (event: RecordedEvent) => {
      if (isEvent(event, "ThreadPurged")) return forgetRuns(event.data.run_ids ?? []);
      if (event.streamId.startsWith(A2A_PUSH_STREAM_PREFIX)) return applyPush(event);
      const continued = a2aPush.continuedTask(event);
      if (continued && taskLinked.get(continued.task_id) !== undefined) link.run(continued.run_id, continued.task_id);
      const key = webhookDeliveries.key(event);
      if (key === undefined) return;
      if (isEvent(event, "RunEnded")) {
        const task = linked.get(key) as string | undefined;
        if (task !== undefined) {
          for (const d of a2aPush.deliveriesOnEnd(key, task, configs(task), event.data)) if (!find(deliveryKey(d))) write(d);
        }
      }
      const before = find(key);
      if (!before && event.type !== "RunEnqueued") return;
      const after = webhookDeliveries.evolve(before, event);
      if (!after || after === before) return;
      write(after);
    };
  },
};

/**
 * A purged thread's runs: their deliveries (which hold the run and its end), their push configs
 * (a task's id is a run id) and links, as a rebuild from the purged log would not have them.
 */
function forgetPurgedRuns(db: Database.Database): (runIds: readonly string[]) => void {
  const deliveries = db.prepare("DELETE FROM webhook_deliveries WHERE run_id = ?");
  const configs = db.prepare("DELETE FROM a2a_push_configs WHERE task_id = ?");
  const links = db.prepare("DELETE FROM a2a_push_runs WHERE run_id = ? OR task_id = ?");
  return (runIds) => {
    for (const runId of runIds) {
      deliveries.run(runId);
      configs.run(runId);
      links.run(runId, runId);
    }
  };
}

/** The push configs of a task, oldest first. */
export function pushConfigsOf(db: Database.Database): (taskId: string) => StoredPushConfig[] {
  const select = db.prepare("SELECT doc FROM a2a_push_configs WHERE task_id = ? ORDER BY rowid").pluck();
  return (taskId) => (select.all(taskId) as string[]).map((doc) => JSON.parse(doc) as StoredPushConfig);
}

/** bigint revisions survive JSON as strings. */
export function encodeDelivery(d: Delivery): string {
  return JSON.stringify({ ...d, revision: typeof d.revision === "bigint" ? String(d.revision) : d.revision });
}

export function decodeDelivery(doc: string): Delivery {
  const raw = JSON.parse(doc) as Delivery & { revision: string };
  return { ...raw, revision: raw.revision === "no_stream" ? "no_stream" : BigInt(raw.revision) };
}

/** A delivery by key (a run's webhook: its run id). */
export function findDelivery(db: Database.Database): (key: string) => Delivery | undefined {
  const select = db.prepare("SELECT doc FROM webhook_deliveries WHERE id = ?").pluck();
  return (key) => {
    const doc = select.get(key) as string | undefined;
    return doc === undefined ? undefined : decodeDelivery(doc);
  };
}

/** The queries of the dispatcher. */
export class WebhooksReadModel {
  /** A delivery by key (a run's webhook: its run id). */
  readonly get: (key: string) => Delivery | undefined;
  /** The push configs of an A2A task. */
  readonly pushConfigs: (taskId: string) => StoredPushConfig[];
  private readonly pushOfRunStmt: Database.Statement;
  private readonly dueStmt: Database.Statement;
  private readonly nextStmt: Database.Statement;
  private readonly sendingStmt: Database.Statement;
  private readonly openCountStmt: Database.Statement;

  constructor(db: Database.Database) {
    this.get = findDelivery(db);
    this.pushConfigs = pushConfigsOf(db);
    this.pushOfRunStmt = db.prepare("SELECT doc FROM webhook_deliveries WHERE run_id = ? AND kind = 'a2a-push' ORDER BY id").pluck();
    // `?` lists (as JSON) the deliveries this process is sending now: they are neither due nor a reason to wake.
    this.dueStmt = db
      .prepare(
        "SELECT doc FROM webhook_deliveries WHERE status IN ('due', 'sending') AND due_at <= ? AND id NOT IN (SELECT value FROM json_each(?)) ORDER BY due_at LIMIT ?",
      )
      .pluck();
    this.sendingStmt = db.prepare("SELECT doc FROM webhook_deliveries WHERE status IN ('due', 'sending') AND status = 'sending'").pluck();
    this.openCountStmt = db.prepare("SELECT count(*) FROM webhook_deliveries WHERE status IN ('due', 'sending')").pluck();
    this.nextStmt = db
      .prepare("SELECT min(due_at) FROM webhook_deliveries WHERE status IN ('due', 'sending') AND id NOT IN (SELECT value FROM json_each(?))")
      .pluck();
  }

  /** Deliveries whose attempt is due (or whose claim lapsed) at `nowMs`, oldest first, but those in `excluding`. */
  due(nowMs: number, limit: number, excluding: Iterable<string> = []): Delivery[] {
    return (this.dueStmt.all(nowMs, JSON.stringify([...excluding]), limit) as string[]).map(decodeDelivery);
  }

  /** The A2A push deliveries of a run's end. */
  pushesOfRun(runId: string): Delivery[] {
    return (this.pushOfRunStmt.all(runId) as string[]).map(decodeDelivery);
  }

  /** Deliveries claimed and not finished (at start on a single-process store: claims of a dead process). */
  sending(): Delivery[] {
    return (this.sendingStmt.all() as string[]).map(decodeDelivery);
  }

  /** Deliveries due or being sent, across every process on the store (through the partial index). */
  openCount(): number {
    return this.openCountStmt.get() as number;
  }

  /** The earliest due time of any open delivery but those in `excluding` (ms), or undefined. */
  nextDue(excluding: Iterable<string> = []): number | undefined {
    const v = this.nextStmt.get(JSON.stringify([...excluding])) as number | null;
    return v ?? undefined;
  }
}
