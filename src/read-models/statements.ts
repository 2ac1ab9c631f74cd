import type Database from "better-sqlite3";
import type { SqlFragment } from "./json-filter.js";

/**
 * Prepared statements of queries whose SQL depends on the filters given (search, count): one
 * statement per distinct SQL text, kept in a small LRU so repeated query shapes are not parsed
 * again, and memory stays bounded whatever clients send.
 */
export class StatementCache {
  private readonly statements = new Map<string, Database.Statement>();

  constructor(
    private readonly db: Database.Database,
    private readonly max = 200,
  ) {}

  get(sql: string): Database.Statement {
    let statement = this.statements.get(sql);
    if (statement) {
      this.statements.delete(sql);
    } else {
      statement = this.db.prepare(sql);
      if (this.statements.size >= this.max) this.statements.delete(this.statements.keys().next().value as string);
    }
    this.statements.set(sql, statement);
    return statement;
  }
}

export type SortOrder = "asc" | "desc";

export interface PageQuery {
  /** Conditions, ANDed. */
  where: readonly SqlFragment[];
  /** A column name from the caller's whitelist. */
  sortColumn: string;
  sortOrder: SortOrder;
  limit: number;
  offset: number;
}

/**
 * `SELECT <columns> FROM <from> WHERE … ORDER BY … LIMIT … OFFSET …` and the matching count, read
 * from `counted` when given (another source of the same rows, e.g. an index alone).
 */
export function pageAndCount(
  cache: StatementCache,
  from: string,
  columns: string,
  idColumn: string,
  q: PageQuery,
  counted: { from: string; where: readonly SqlFragment[] } = { from, where: q.where },
): { rows: unknown[]; total: number } {
  const where = q.where.length ? q.where.map((w) => `(${w.sql})`).join(" AND ") : "1";
  const params = q.where.flatMap((w) => w.params);
  const dir = q.sortOrder === "asc" ? "ASC" : "DESC";
  const rows = cache
    .get(`SELECT ${columns} FROM ${from} WHERE ${where} ORDER BY ${q.sortColumn} ${dir}, ${idColumn} ${dir} LIMIT ? OFFSET ?`)
    .all(...params, q.limit, q.offset);
  const total = countWhere(cache, counted.from, counted.where);
  return { rows, total };
}

export function countWhere(cache: StatementCache, from: string, conditions: readonly SqlFragment[]): number {
  const where = conditions.length ? conditions.map((w) => `(${w.sql})`).join(" AND ") : "1";
  return Number(
    cache
      .get(`SELECT count(*) FROM ${from} WHERE ${where}`)
      .pluck()
      .get(...conditions.flatMap((w) => w.params)),
  );
}
