import type Database from "better-sqlite3";
import { and, containsSql, indexValueOf, isScalar, type SqlFragment } from "./json-filter.js";
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
  /** Replaces the entity's index rows (undefined: the entity left the read model). */
  replace(id: string, metadata: JsonObject | undefined): void;
}

export function prepareMetadataIndex(db: Database.Database, table: string): MetadataIndexWriter {
  const remove = db.prepare(`DELETE FROM ${table}_metadata WHERE id = ?`);
  const insert = db.prepare(`INSERT INTO ${table}_metadata (id, key, value) VALUES (?, ?, ?)`);
  return {
    replace(id, metadata) {
      remove.run(id);
      if (!metadata) return;
      for (const [key, value] of Object.entries(metadata)) if (isScalar(value)) insert.run(id, key, indexValueOf(value));
    },
  };
}

/** WHERE fragment: the entity's metadata contains `filter` (top-level scalars through the index). */
export function metadataFilterSql(table: string, idColumn: string, metadataColumn: string, filter: JsonObject): SqlFragment {
  const parts: SqlFragment[] = [];
  for (const [key, value] of Object.entries(filter)) {
    if (isScalar(value)) {
      parts.push({ sql: `${idColumn} IN (SELECT id FROM ${table}_metadata WHERE key = ? AND value = ?)`, params: [key, indexValueOf(value)] });
    } else {
      parts.push(containsSql(metadataColumn, { [key]: value }));
    }
  }
  return and(parts);
}
