import type Database from "better-sqlite3";
import { assertSearchable, containsSql, indexValueOf, isScalar, type SqlFragment } from "./json-filter.js";
import type { JsonObject } from "../domain/json.js";

/**
 * An index of the top-level scalar metadata entries of one entity table: `(key, value)` rows per
 * live entity, so a metadata filter such as `{"user": "ada"}` is an index lookup, not a scan of
 * every row's JSON. Nested filters fall back to JSON functions on the entity's metadata column,
 * among the rows the other conditions left.
 *
 * `order` names a column of the entity copied into each of its index rows, after `(key, value)` in
 * the index: a search sorted by it walks the matching index rows in that order and reads only the
 * page's entities, where a sort over the entity's own column reads every match first. Its value
 * must not change unless the index rows are replaced (see MetadataIndexWriter).
 */
export function metadataIndexDdl(table: string, order?: string): string[] {
  if (order === undefined)
    return [
      `CREATE TABLE ${table}_metadata (id TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (id, key)) WITHOUT ROWID`,
      `CREATE INDEX ${table}_metadata_kv ON ${table}_metadata (key, value)`,
    ];
  return [
    `CREATE TABLE ${table}_metadata (id TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, ${order} TEXT NOT NULL, PRIMARY KEY (id, key)) WITHOUT ROWID`,
    `CREATE INDEX ${table}_metadata_kv ON ${table}_metadata (key, value, ${order}, id)`,
  ];
}

export interface MetadataIndexWriter {
  /**
   * Replaces the entity's index rows (undefined: the entity left the read model, and its rows go);
   * `fresh`: it has none yet; `order`: the value of the index's order column (required with one).
   */
  replace(id: string, metadata: JsonObject | undefined, fresh?: boolean, order?: string): void;
}

export function prepareMetadataIndex(db: Database.Database, table: string, orderColumn?: string): MetadataIndexWriter {
  const remove = db.prepare(`DELETE FROM ${table}_metadata WHERE id = ?`);
  const insert =
    orderColumn === undefined
      ? db.prepare(`INSERT INTO ${table}_metadata (id, key, value) VALUES (?, ?, ?)`)
      : db.prepare(`INSERT INTO ${table}_metadata (id, key, value, ${orderColumn}) VALUES (?, ?, ?, ?)`);
  return {
    replace(id, metadata, fresh = false, order) {
      if (!fresh) remove.run(id);
      if (!metadata) return;
      if (orderColumn !== undefined && order === undefined) throw new Error(`${table}_metadata: no ${orderColumn} given for ${id}`);
      const rest = orderColumn === undefined ? [] : [order];
      for (const [key, value] of Object.entries(metadata)) if (isScalar(value)) insert.run(id, key, indexValueOf(value), ...rest);
    },
  };
}

/** Where a query reads its rows from, and the conditions on them. */
export interface FilteredSource {
  /** The FROM clause. */
  from: string;
  where: SqlFragment[];
}

/** A source driven from the metadata index (alias `driver`), and what of it the index alone answers. */
export interface MetadataSource extends FilteredSource {
  /**
   * Set when a scalar entry drives the query: the index rows alone (`FROM` the index table, the
   * conditions of the scalar entries). Since the index holds live entities only, a count whose
   * other conditions are all among these needs no entity row.
   */
  index?: FilteredSource;
}

/**
 * The rows of `table` whose metadata contains `filter`. The first top-level scalar entry drives the
 * query from the index (`CROSS JOIN` fixes that join order, so the planner cannot prefer walking a
 * sort index over every row); further scalar entries are index lookups on the driving row's id,
 * nested ones JSON functions on the remaining rows.
 */
export function metadataSource(table: string, idColumn: string, metadataColumn: string, filter: JsonObject | undefined): MetadataSource {
  assertSearchable(filter, "metadata");
  const where: SqlFragment[] = [];
  const indexWhere: SqlFragment[] = [];
  let from = table;
  for (const [key, value] of Object.entries(filter ?? {})) {
    if (isScalar(value) && from === table) {
      from = `${table}_metadata AS driver CROSS JOIN ${table} ON ${table}.${idColumn} = driver.id`;
      indexWhere.push({ sql: "driver.key = ? AND driver.value = ?", params: [key, indexValueOf(value)] });
      where.push(indexWhere[indexWhere.length - 1]!);
    } else if (isScalar(value)) {
      indexWhere.push({ sql: `driver.id IN (SELECT id FROM ${table}_metadata WHERE key = ? AND value = ?)`, params: [key, indexValueOf(value)] });
      where.push(indexWhere[indexWhere.length - 1]!);
    } else {
      where.push(containsSql(`${table}.${metadataColumn}`, { [key]: value }));
    }
  }
  return from === table ? { from, where } : { from, where, index: { from: `${table}_metadata AS driver`, where: indexWhere } };
}
