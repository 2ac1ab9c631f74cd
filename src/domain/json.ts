/** Plain JSON helpers shared by the deciders and read models. */

import { isPlainObject, type JsonObject } from "../util/json.js";

export { isPlainObject, type Json, type JsonObject } from "../util/json.js";

/**
 * JSON containment as PostgreSQL's `@>` means it (what the official server's metadata filters use):
 * every key of `filter` is in `value` with a contained value; arrays contain each filter element.
 */
export function jsonContains(value: unknown, filter: unknown): boolean {
  if (isPlainObject(filter)) {
    if (!isPlainObject(value)) return false;
    return Object.entries(filter).every(([k, v]) => Object.hasOwn(value, k) && jsonContains(value[k], v));
  }
  if (Array.isArray(filter)) {
    if (!Array.isArray(value)) return false;
    return filter.every((f) => value.some((v) => jsonContains(v, f)));
  }
  return value === filter;
}

/** Keeps only the listed keys (the API's `select`). */
export function pick<T extends object>(record: T, keys: readonly string[] | undefined): Partial<T> {
  if (!keys || keys.length === 0) return record;
  return Object.fromEntries(keys.filter((k) => k in record).map((k) => [k, (record as JsonObject)[k]])) as Partial<T>;
}

export type SortOrder = "asc" | "desc";

/** Stable sort by one field; ISO timestamps and ids compare as strings. */
export function sortBy<T>(items: T[], field: keyof T, order: SortOrder): T[] {
  const dir = order === "asc" ? 1 : -1;
  return [...items].sort((a, b) => {
    const x = a[field] as unknown as string | number;
    const y = b[field] as unknown as string | number;
    return x < y ? -dir : x > y ? dir : 0;
  });
}
