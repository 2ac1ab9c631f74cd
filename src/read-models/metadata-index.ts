import type Database from "better-sqlite3";
import { assertSearchable, containsSql, indexValueOf, isScalar, type SqlFragment } from "./json-filter.js";
import type { JsonObject } from "../domain/json.js";

/**
 * An index of the top-level scalar metadata entries of one entity table: `(key, value)` rows per
 * entity, so a metadata filter such as `{"user": "ada"}` is an index lookup, not a scan of every
 * row's JSON. Nested filters fall back to JSON functions on the entity's metadata column, among the
 * rows the other conditions left.
 */
export function metadataIndexDdl(table: string): string[] {
  return [
    `CREATE TABLE ${table}_metadata (id TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (id, key)) WITHOUT ROWID`,
    `CREATE INDEX ${table}_metadata_kv ON ${table}_metadata (key, value)`,
  ];
}

export interface MetadataIndexWriter {
  /** Replaces the entity's index rows (undefined: the entity left the read model); `fresh`: it has none yet. */
  replace(id: string, metadata: JsonObject | undefined, fresh?: boolean): void;
}

export function prepareMetadataIndex(db: Database.Database, table: string): MetadataIndexWriter {
  const remove = db.prepare(`DELETE FROM ${table}_metadata WHERE id = ?`);
  const insert = db.prepare(`INSERT INTO ${table}_metadata (id, key, value) VALUES (?, ?, ?)`);
  return {
    replace(id, metadata, fresh = false) {
      if (!fresh) remove.run(id);
      if (!metadata) return;
      for (const [key, value] of Object.entries(metadata)) if (isScalar(value)) insert.run(id, key, indexValueOf(value));
    },
  };
}

/** Where a query reads its rows from, and the conditions on them. */
export interface FilteredSource {
  /** The FROM clause. */
  from: string;
  where: SqlFragment[];
}

/**
 * The rows of `table` whose metadata contains `filter`. The first top-level scalar entry drives the
 * query from the index (`CROSS JOIN` fixes that join order, so the planner cannot prefer walking a
 * sort index over every row); further scalar entries are index lookups, nested ones JSON functions
 * on the remaining rows.
 */
export function metadataSource(table: string, idColumn: string, metadataColumn: string, filter: JsonObject | undefined): FilteredSource {
  assertSearchable(filter, "metadata");
  const where: SqlFragment[] = [];
  let from = table;
  for (const [key, value] of Object.entries(filter ?? {})) {
    if (isScalar(value) && from === table) {
      from = `${table}_metadata AS driver CROSS JOIN ${table} ON ${table}.${idColumn} = driver.id`;
      where.push({ sql: "driver.key = ? AND driver.value = ?", params: [key, indexValueOf(value)] });
    } else if (isScalar(value)) {
      where.push({ sql: `${table}.${idColumn} IN (SELECT id FROM ${table}_metadata WHERE key = ? AND value = ?)`, params: [key, indexValueOf(value)] });
    } else {
      where.push(containsSql(`${table}.${metadataColumn}`, { [key]: value }));
    }
  }
  return { from, where };
}
