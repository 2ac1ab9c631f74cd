import { isPlainObject } from "../domain/json.js";

/** A WHERE fragment and its parameters. */
export interface SqlFragment {
  sql: string;
  params: unknown[];
}

export class UnsupportedFilterError extends Error {
  override name = "UnsupportedFilterError";
}

/** SQLite JSON path of one object key (`$."key"`). */
export function keyPath(base: string, key: string): string {
  if (key.includes('"')) throw new UnsupportedFilterError(`metadata keys with '"' cannot be filtered on (key ${JSON.stringify(key)})`);
  return `${base}."${key}"`;
}

/** The canonical text a scalar has in the metadata index tables (its JSON). */
export const indexValueOf = (value: unknown): string => JSON.stringify(value);

/** Whether a filter value is a JSON scalar (what the top-level metadata index holds). */
export const isScalar = (value: unknown): boolean =>
  value === null || typeof value === "string" || typeof value === "number" || typeof value === "boolean";

/** A JSON path as an SQL expression (a bound literal, or built from a json_each row's `fullkey`). */
interface PathExpr {
  sql: string;
  params: unknown[];
}

const literalPath = (path: string): PathExpr => ({ sql: "?", params: [path] });
const childPath = (parent: PathExpr, key: string): PathExpr =>
  parent.sql === "?" ? literalPath(keyPath(String(parent.params[0]), key)) : { sql: `(${parent.sql} || ?)`, params: [...parent.params, keyPath("", key)] };

let aliasCounter = 0;

/**
 * JSON containment as PostgreSQL's `@>` means it (the semantics of `jsonContains` in
 * src/domain/json.ts), as SQL over a JSON text column: every key of `filter` is present with a
 * contained value, arrays contain each filter element. `column` is an SQL expression holding JSON
 * text (a column name).
 */
export function containsSql(column: string, filter: unknown, path: PathExpr = literalPath("$")): SqlFragment {
  const typeIs = (types: string): SqlFragment => ({ sql: `json_type(${column}, ${path.sql}) IN (${types})`, params: [...path.params] });
  if (isPlainObject(filter)) {
    const parts: SqlFragment[] = [typeIs("'object'")];
    for (const [key, value] of Object.entries(filter)) parts.push(containsSql(column, value, childPath(path, key)));
    return and(parts);
  }
  if (Array.isArray(filter)) {
    const parts: SqlFragment[] = [typeIs("'array'")];
    for (const element of filter) {
      // Each filter element must be contained in some element of the array: address that element
      // in the same column by the full path json_each reports for it.
      const alias = `je${(aliasCounter = (aliasCounter + 1) % 1_000_000)}`;
      const inner = containsSql(column, element, { sql: `${alias}.fullkey`, params: [] });
      parts.push({
        sql: `EXISTS (SELECT 1 FROM json_each(${column}, ${path.sql}) AS ${alias} WHERE ${inner.sql})`,
        params: [...path.params, ...inner.params],
      });
    }
    return and(parts);
  }
  if (filter === null) return typeIs("'null'");
  if (typeof filter === "boolean") return typeIs(filter ? "'true'" : "'false'");
  const extract = `json_extract(${column}, ${path.sql})`;
  if (typeof filter === "number") {
    return { sql: `(json_type(${column}, ${path.sql}) IN ('integer', 'real') AND ${extract} = ?)`, params: [...path.params, ...path.params, filter] };
  }
  if (typeof filter === "string") {
    return { sql: `(json_type(${column}, ${path.sql}) = 'text' AND ${extract} = ?)`, params: [...path.params, ...path.params, filter] };
  }
  throw new UnsupportedFilterError(`cannot filter on a value of type ${typeof filter}`);
}

export function and(parts: readonly SqlFragment[]): SqlFragment {
  if (parts.length === 0) return { sql: "1", params: [] };
  return { sql: parts.map((p) => `(${p.sql})`).join(" AND "), params: parts.flatMap((p) => p.params) };
}
