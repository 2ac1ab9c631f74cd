/**
 * Authorization filters, as the official servers define them: the object an `on(...)` handler
 * returns. Every key names a metadata field and every entry must hold (AND):
 *   `{owner: "alice"}`                    metadata.owner === "alice"
 *   `{owner: {$eq: "alice"}}`             the same
 *   `{team: {$contains: "x"}}`            metadata.team is an array holding "x"
 *   `{team: {$contains: ["x", "y"]}}`     metadata.team is an array holding both
 * Values are JSON scalars (string, number, boolean, null). Pure: no I/O.
 */
import * as z from "zod";
import { isPlainObject } from "../util/json.js";

export type FilterScalar = string | number | boolean | null;
export type FilterValue = FilterScalar | { $eq: FilterScalar } | { $contains: FilterScalar | FilterScalar[] };
export type AuthFilters = Record<string, FilterValue>;

const Scalar = z.union([z.string(), z.number().finite(), z.boolean(), z.null()]);
/** Keys become a JSON path `$."key"`: a double quote would end it early. */
const Key = z
  .string()
  .min(1)
  .refine((k) => !k.includes('"'), 'must not contain "');

export const AuthFiltersSchema = z.record(
  Key,
  z.union([Scalar, z.strictObject({ $eq: Scalar }), z.strictObject({ $contains: z.union([Scalar, z.array(Scalar).min(1)]) })]),
);

/** Validates what a handler returned; the message names the offending key. */
export function parseFilters(value: unknown): AuthFilters {
  const parsed = AuthFiltersSchema.safeParse(value);
  if (parsed.success) return parsed.data as AuthFilters;
  const issue = parsed.error.issues[0];
  const where = issue?.path.length ? `${issue.path.map(String).join(".")}: ` : "";
  throw new Error(`${where}${issue?.message ?? "invalid"} (expected {key: value}, {key: {$eq: value}} or {key: {$contains: value | value[]}})`);
}

/** JSON-scalar equality as SQLite sees it: same JSON type, same value (1 and 1.0 are equal). */
const sameScalar = (a: unknown, b: FilterScalar) => a === b;

/** Whether one resource's metadata passes the filters (for single-row checks). No filters: true. */
export function filterMatches(metadata: unknown, filters: AuthFilters | undefined): boolean {
  if (!filters) return true;
  const entries = Object.entries(filters);
  if (entries.length === 0) return true;
  if (!isPlainObject(metadata)) return false;
  for (const [key, filter] of entries) {
    if (!Object.hasOwn(metadata, key)) return false;
    const actual = metadata[key];
    if (isPlainObject(filter) && "$contains" in filter) {
      if (!Array.isArray(actual)) return false;
      const wanted = Array.isArray(filter.$contains) ? filter.$contains : [filter.$contains];
      if (!wanted.every((w) => actual.some((a) => sameScalar(a, w)))) return false;
    } else {
      const expected = isPlainObject(filter) ? (filter as { $eq: FilterScalar }).$eq : (filter as FilterScalar);
      if (!sameScalar(actual, expected)) return false;
    }
  }
  return true;
}

/** A column reference (`metadata`, `t.metadata`) is spliced into SQL: only identifiers pass. */
const COLUMN = /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$/;

/** SQL matching one JSON scalar given the expressions of its JSON type and its SQL value. */
function scalarSql(typeExpr: string, valueExpr: string, v: FilterScalar, params: unknown[]): string {
  if (v === null) return `${typeExpr} = 'null'`;
  if (typeof v === "boolean") return `${typeExpr} = '${v ? "true" : "false"}'`;
  if (typeof v === "number") {
    params.push(v);
    return `(${typeExpr} IN ('integer', 'real') AND ${valueExpr} = ?)`;
  }
  params.push(v);
  return `(${typeExpr} = 'text' AND ${valueExpr} = ?)`;
}

/**
 * The filters as a WHERE fragment over a JSON text column, with SQLite's JSON functions, so
 * search, count, update and delete restrict rows in the query itself. Same semantics as
 * `filterMatches`. No filters: `1` (true). Parameters are positional (`?`), in order.
 */
export function filtersToSql(filters: AuthFilters | undefined, metadataColumn: string): { sql: string; params: unknown[] } {
  if (!COLUMN.test(metadataColumn)) throw new Error(`filtersToSql: not a column name: ${metadataColumn}`);
  return filtersToSqlOver(filters, metadataColumn);
}

/**
 * As filtersToSql over a JSON-valued SQL expression the read model builds itself (e.g. a store
 * item's value with its namespace and key set in it). The expression is spliced into the SQL:
 * it must be a constant of the code, never made from input.
 */
export function filtersToSqlOver(filters: AuthFilters | undefined, jsonExpression: string): { sql: string; params: unknown[] } {
  const entries = Object.entries(filters ?? {});
  if (entries.length === 0) return { sql: "1", params: [] };
  const col = jsonExpression;
  const params: unknown[] = [];
  const clauses = entries.map(([key, filter]) => {
    const path = `$."${key}"`;
    if (isPlainObject(filter) && "$contains" in filter) {
      const wanted = Array.isArray(filter.$contains) ? filter.$contains : [filter.$contains];
      params.push(path);
      const parts = [`json_type(${col}, ?) = 'array'`];
      for (const w of wanted) {
        params.push(path);
        const sub: unknown[] = [];
        const match = scalarSql("je.type", "je.value", w, sub);
        params.push(...sub);
        parts.push(`EXISTS (SELECT 1 FROM json_each(${col}, ?) AS je WHERE ${match})`);
      }
      return `(${parts.join(" AND ")})`;
    }
    const expected = isPlainObject(filter) ? (filter as { $eq: FilterScalar }).$eq : (filter as FilterScalar);
    const typeParams: unknown[] = [path];
    if (typeof expected === "number" || typeof expected === "string") typeParams.push(path);
    // Both placeholders (json_type's path, then json_extract's) precede the value's.
    const sub: unknown[] = [];
    const match = scalarSql(`json_type(${col}, ?)`, `json_extract(${col}, ?)`, expected, sub);
    params.push(...typeParams, ...sub);
    return match;
  });
  return { sql: `(${clauses.join(" AND ")})`, params };
}

/** The filters as read-model query conditions over a JSON metadata column (none without filters). */
export function authConditions(filters: AuthFilters | undefined, metadataColumn: string): { sql: string; params: unknown[] }[] {
  return filters && Object.keys(filters).length > 0 ? [filtersToSql(filters, metadataColumn)] : [];
}
