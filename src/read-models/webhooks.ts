import type Database from "better-sqlite3";
import type { RecordedEvent } from "../eventstore/types.js";
import type { TableProjection } from "./table.js";
import { webhookDeliveries } from "../../projections/webhooks.js";
import type { Delivery } from "../domain/webhooks.js";

/**
 * Webhook deliveries, one row per run created with a webhook: its state, when its next attempt is
 * due (or its claim lapses), and the folded delivery as JSON. The dispatcher asks for due rows
 * through the partial index; nothing is kept in memory.
 */
export const webhooksTable: TableProjection = {
  name: webhookDeliveries.name,
  version: 1,
  ddl: [
    `CREATE TABLE webhook_deliveries (
       run_id TEXT PRIMARY KEY,
       status TEXT NOT NULL,
       due_at INTEGER,
       doc TEXT NOT NULL
     )`,
    "CREATE INDEX webhook_deliveries_due ON webhook_deliveries (due_at) WHERE status IN ('due', 'sending')",
  ],
  streamPrefixes: webhookDeliveries.streamPrefixes,
  eventTypes: webhookDeliveries.eventTypes,
  prepare(db) {
    const find = findDelivery(db);
    const upsert = db.prepare(`INSERT INTO webhook_deliveries (run_id, status, due_at, doc) VALUES (@run_id, @status, @due_at, @doc)
      ON CONFLICT (run_id) DO UPDATE SET status = excluded.status, due_at = excluded.due_at, doc = excluded.doc`);
    return (event: RecordedEvent) => {
      const key = webhookDeliveries.key(event);
      if (key === undefined) return;
      const before = find(key);
      if (!before && event.type !== "RunEnqueued") return;
      const after = webhookDeliveries.evolve(before, event);
      if (!after || after === before) return;
      upsert.run({ run_id: key, status: after.status, due_at: after.due_at, doc: encodeDelivery(after) });
    };
  },
};

/** bigint revisions survive JSON as strings. */
export function encodeDelivery(d: Delivery): string {
  return JSON.stringify({ ...d, revision: typeof d.revision === "bigint" ? String(d.revision) : d.revision });
}

export function decodeDelivery(doc: string): Delivery {
  const raw = JSON.parse(doc) as Delivery & { revision: string };
  return { ...raw, revision: raw.revision === "no_stream" ? "no_stream" : BigInt(raw.revision) };
}

export function findDelivery(db: Database.Database): (runId: string) => Delivery | undefined {
  const select = db.prepare("SELECT doc FROM webhook_deliveries WHERE run_id = ?").pluck();
  return (runId) => {
    const doc = select.get(runId) as string | undefined;
    return doc === undefined ? undefined : decodeDelivery(doc);
  };
}

/** The queries of the dispatcher. */
export class WebhooksReadModel {
  readonly get: (runId: string) => Delivery | undefined;
  private readonly dueStmt: Database.Statement;
  private readonly nextStmt: Database.Statement;
  private readonly sendingStmt: Database.Statement;
  private readonly openCountStmt: Database.Statement;

  constructor(db: Database.Database) {
    this.get = findDelivery(db);
    // `?` lists (as JSON) the deliveries this process is sending now: they are neither due nor a reason to wake.
    this.dueStmt = db.prepare("SELECT doc FROM webhook_deliveries WHERE status IN ('due', 'sending') AND due_at <= ? AND run_id NOT IN (SELECT value FROM json_each(?)) ORDER BY due_at LIMIT ?").pluck();
    this.sendingStmt = db.prepare("SELECT doc FROM webhook_deliveries WHERE status IN ('due', 'sending') AND status = 'sending'").pluck();
    this.openCountStmt = db.prepare("SELECT count(*) FROM webhook_deliveries WHERE status IN ('due', 'sending')").pluck();
    this.nextStmt = db.prepare("SELECT min(due_at) FROM webhook_deliveries WHERE status IN ('due', 'sending') AND run_id NOT IN (SELECT value FROM json_each(?))").pluck();
  }

  /** Deliveries whose attempt is due (or whose claim lapsed) at `nowMs`, oldest first, but those in `excluding`. */
  due(nowMs: number, limit: number, excluding: Iterable<string> = []): Delivery[] {
    return (this.dueStmt.all(nowMs, JSON.stringify([...excluding]), limit) as string[]).map(decodeDelivery);
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
