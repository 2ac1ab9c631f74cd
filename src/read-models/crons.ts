import type Database from "better-sqlite3";
import type { RecordedEvent } from "../eventstore/types.js";
import type { TableProjection } from "./table.js";
import { cronsProjection } from "../../projections/crons.js";
import { completionDueAt, nextRunOf, publicCron, type CronState } from "../domain/crons.js";
import { StatementCache, pageAndCount, countWhere, type SortOrder } from "./statements.js";
import { containsSql, type SqlFragment } from "./json-filter.js";
import type { JsonObject } from "../domain/json.js";
import { authConditions, type AuthFilters } from "./auth-filters.js";

/**
 * Crons: one row per live cron with the columns search filters and sorts on, and `next_run_at`
 * (ms), the scheduler's wake-up index. A deleted cron's row goes; the log keeps it.
 */
export const cronsTable: TableProjection = {
  name: cronsProjection.name,
  version: 2,
  ddl: [
    `CREATE TABLE crons (
       cron_id TEXT PRIMARY KEY,
       assistant_id TEXT NOT NULL,
       thread_id TEXT,
       enabled INTEGER NOT NULL,
       next_run_at INTEGER,
       next_run_date TEXT,
       end_time TEXT,
       created_at TEXT NOT NULL,
       updated_at TEXT NOT NULL,
       metadata TEXT NOT NULL,
       doc TEXT NOT NULL
     )`,
    "CREATE INDEX crons_assistant ON crons (assistant_id, created_at)",
    "CREATE INDEX crons_thread ON crons (thread_id, created_at)",
    "CREATE INDEX crons_created ON crons (created_at)",
    "CREATE INDEX crons_next_run ON crons (next_run_at) WHERE next_run_at IS NOT NULL",
  ],
  streamPrefixes: cronsProjection.streamPrefixes,
  eventTypes: cronsProjection.eventTypes,
  prepare(db) {
    const find = findCron(db);
    const upsert =
      db.prepare(`INSERT INTO crons (cron_id, assistant_id, thread_id, enabled, next_run_at, next_run_date, end_time, created_at, updated_at, metadata, doc)
      VALUES (@cron_id, @assistant_id, @thread_id, @enabled, @next_run_at, @next_run_date, @end_time, @created_at, @updated_at, @metadata, @doc)
      ON CONFLICT (cron_id) DO UPDATE SET assistant_id = excluded.assistant_id, thread_id = excluded.thread_id, enabled = excluded.enabled,
        next_run_at = excluded.next_run_at, next_run_date = excluded.next_run_date, end_time = excluded.end_time, updated_at = excluded.updated_at, metadata = excluded.metadata, doc = excluded.doc`);
    const remove = db.prepare("DELETE FROM crons WHERE cron_id = ?");
    return (event: RecordedEvent) => {
      const key = cronsProjection.key(event);
      if (key === undefined) return;
      const after = cronsProjection.evolve(find(key), event);
      if (!after) {
        remove.run(key);
        return;
      }
      // Due for its next tick, or earlier to complete a claimed tick whose run was never recorded.
      const completion = completionDueAt(after);
      const tick = nextRunOf(after);
      const next = completion === null ? tick : tick === null ? completion : Math.min(tick, completion);
      upsert.run({
        cron_id: key,
        assistant_id: after.assistant_id,
        thread_id: after.thread_id,
        enabled: after.enabled ? 1 : 0,
        next_run_at: next,
        next_run_date: publicCron(after).next_run_date,
        end_time: after.end_time,
        created_at: after.created_at,
        updated_at: after.updated_at,
        metadata: JSON.stringify(after.metadata),
        doc: encodeCron(after),
      });
    };
  },
};

function encodeCron(s: CronState): string {
  return JSON.stringify({ ...s, revision: String(s.revision) });
}

function decodeCron(doc: string): CronState {
  const raw = JSON.parse(doc) as CronState & { revision: string };
  return { ...raw, revision: BigInt(raw.revision) };
}

function findCron(db: Database.Database): (id: string) => CronState | undefined {
  const select = db.prepare("SELECT doc FROM crons WHERE cron_id = ?").pluck();
  return (id) => {
    const doc = select.get(id) as string | undefined;
    return doc === undefined ? undefined : decodeCron(doc);
  };
}

export const CRON_SORT_FIELDS = ["cron_id", "assistant_id", "thread_id", "next_run_date", "end_time", "created_at", "updated_at"] as const;
export type CronSortField = (typeof CRON_SORT_FIELDS)[number];

export interface CronFilter {
  assistant_id?: string;
  thread_id?: string;
  enabled?: boolean;
  /** JSON containment on the cron's metadata. */
  metadata?: JsonObject;
  /** Custom auth: what the user may see (conditions on the cron's metadata). */
  auth?: AuthFilters;
}

function where(q: CronFilter): SqlFragment[] {
  const w: SqlFragment[] = [];
  if (q.assistant_id !== undefined) w.push({ sql: "assistant_id = ?", params: [q.assistant_id] });
  if (q.thread_id !== undefined) w.push({ sql: "thread_id = ?", params: [q.thread_id] });
  if (q.enabled !== undefined) w.push({ sql: "enabled = ?", params: [q.enabled ? 1 : 0] });
  if (q.metadata !== undefined && Object.keys(q.metadata).length) w.push(containsSql("metadata", q.metadata));
  w.push(...authConditions(q.auth, "metadata"));
  return w;
}

/** The queries of the cron endpoints and of the scheduler. */
export class CronsReadModel {
  readonly get: (id: string) => CronState | undefined;
  private readonly cache: StatementCache;
  private readonly dueStmt: Database.Statement;
  private readonly nextStmt: Database.Statement;

  constructor(db: Database.Database) {
    this.get = findCron(db);
    this.cache = new StatementCache(db, 50);
    // `?` lists (as JSON) the crons the scheduler gave up on (quarantined): they are neither due nor a reason to wake.
    this.dueStmt = db
      .prepare(
        "SELECT doc FROM crons WHERE next_run_at IS NOT NULL AND next_run_at <= ? AND cron_id NOT IN (SELECT value FROM json_each(?)) ORDER BY next_run_at LIMIT ?",
      )
      .pluck();
    this.nextStmt = db.prepare("SELECT min(next_run_at) FROM crons WHERE next_run_at IS NOT NULL AND cron_id NOT IN (SELECT value FROM json_each(?))").pluck();
  }

  search(q: CronFilter & { sort_by: CronSortField; sort_order: SortOrder; limit: number; offset: number }): { page: CronState[]; total: number } {
    const { rows, total } = pageAndCount(this.cache, "crons", "doc", "cron_id", {
      where: where(q),
      sortColumn: q.sort_by,
      sortOrder: q.sort_order,
      limit: q.limit,
      offset: q.offset,
    });
    return { page: (rows as { doc: string }[]).map((r) => decodeCron(r.doc)), total };
  }

  count(q: CronFilter): number {
    return countWhere(this.cache, "crons", where(q));
  }

  /** Crons whose next tick is due at `nowMs`, earliest first, but those in `excluding`. */
  due(nowMs: number, limit: number, excluding: readonly string[] = []): CronState[] {
    return (this.dueStmt.all(nowMs, JSON.stringify(excluding), limit) as string[]).map(decodeCron);
  }

  /** The earliest next tick of any cron but those in `excluding` (ms), or undefined. */
  nextDue(excluding: readonly string[] = []): number | undefined {
    return (this.nextStmt.get(JSON.stringify(excluding)) as number | null) ?? undefined;
  }
}
