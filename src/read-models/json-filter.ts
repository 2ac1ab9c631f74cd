import { isPlainObject } from "../domain/json.js";
import { invalid } from "../domain/errors.js";
import { findLimitViolation } from "../util/json-limits.js";

/** A WHERE fragment and its parameters. */
export interface SqlFragment {
  sql: string;
  params: unknown[];
}

export class UnsupportedFilterError extends Error {
  override name = "UnsupportedFilterError";
}

/**
 * SQLite JSON path of one object key (`$."key"`). The label is the key as a JSON string, escapes
 * included: SQLite matches a quoted label against the key's JSON text, so a key holding `\` or `"`
 * must be written escaped to be found.
 */
export function keyPath(base: string, key: string): string {
  return `${base}.${JSON.stringify(key)}`;
}

/** The canonical text a scalar has in the metadata index tables (its JSON). */
export const indexValueOf = (value: unknown): string => JSON.stringify(value);

/** Whether a filter value is a JSON scalar (what the top-level metadata index holds). */
export const isScalar = (value: unknown): boolean => value === null || typeof value === "string" || typeof value === "number" || typeof value === "boolean";

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
/**
 * How much one search filter may ask: its SQL must stay within SQLite's expression depth (1,000; a
 * nested array costs a correlated subquery per level) and its variables (32,766). Stored values
 * may nest deeper than this; a filter beyond it is refused as bad input, never a 500.
 */
export const FILTER_LIMITS = { maxDepth: 16, maxEntries: 1000 } as const;

/** Refuses a filter beyond FILTER_LIMITS (422 at the edges), naming the limit. */
export function assertSearchable(filter: unknown, field = "filter"): void {
  if (findLimitViolation(filter, { maxDepth: FILTER_LIMITS.maxDepth, maxKeys: Infinity })) {
    throw invalid(`${field}: a search filter may nest at most ${FILTER_LIMITS.maxDepth} levels of objects and arrays`);
  }
  let entries = 0;
  const stack: unknown[] = [filter];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v !== "object" || v === null) continue;
    const items = Object.values(v);
    entries += items.length;
    if (entries > FILTER_LIMITS.maxEntries)
      throw invalid(`${field}: a search filter may hold at most ${FILTER_LIMITS.maxEntries} keys and array elements in all`);
    stack.push(...items);
  }
}

export function containsSql(column: string, filter: unknown): SqlFragment {
  assertSearchable(filter);
  return containsSqlAt(column, filter, literalPath("$"));
}

function containsSqlAt(column: string, filter: unknown, path: PathExpr): SqlFragment {
  const typeIs = (types: string): SqlFragment => ({ sql: `json_type(${column}, ${path.sql}) IN (${types})`, params: [...path.params] });
  if (isPlainObject(filter)) {
    const parts: SqlFragment[] = [typeIs("'object'")];
    for (const [key, value] of Object.entries(filter)) parts.push(containsSqlAt(column, value, childPath(path, key)));
    return and(parts);
  }
  if (Array.isArray(filter)) {
    const parts: SqlFragment[] = [typeIs("'array'")];
    for (const element of filter) {
      // Each filter element must be contained in some element of the array: address that element
      // in the same column by the full path json_each reports for it.
      const alias = `je${(aliasCounter = (aliasCounter + 1) % 1_000_000)}`;
      const inner = containsSqlAt(column, element, { sql: `${alias}.fullkey`, params: [] });
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

/** The conjunction of the parts, nested as a balanced tree: a flat chain of N ANDs is an expression N deep for SQLite. */
export function and(parts: readonly SqlFragment[]): SqlFragment {
  if (parts.length === 0) return { sql: "1", params: [] };
  if (parts.length === 1) return { sql: `(${parts[0]!.sql})`, params: parts[0]!.params };
  const half = parts.length >> 1;
  const left = and(parts.slice(0, half));
  const right = and(parts.slice(half));
  return { sql: `(${left.sql} AND ${right.sql})`, params: [...left.params, ...right.params] };
}
