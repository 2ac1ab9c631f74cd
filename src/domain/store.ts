import { createHash } from "node:crypto";
import * as z from "zod";
import type { EventsOf } from "./event-types.js";
import type { EventData } from "../eventstore/types.js";
import type { JsonObject } from "./json.js";
import { JsonObjectSchema } from "../util/json.js";
import { isoOf } from "../util/time.js";

/**
 * The Store (long-term memory shared across threads): items addressed by a namespace (a list of
 * labels) and a key. Each item has its own stream, `store-{hash of [namespace, key]}`, so the
 * optimistic concurrency of one item (a TTL sweep racing a put) is an expected revision, and
 * every event carries the namespace and key so the stream name never has to be decoded.
 * Pure: no I/O; the clock is a parameter.
 */

export const STORE_STREAM_PREFIX = "store-";

/** `store-` + 128 bits of SHA-256 over `[namespace, key]` (labels may hold any character but `.`). */
export function storeItemStream(namespace: readonly string[], key: string): string {
  return (
    STORE_STREAM_PREFIX +
    createHash("sha256")
      .update(JSON.stringify([namespace, key]))
      .digest("hex")
      .slice(0, 32)
  );
}

const Namespace = z.array(z.string());
const Obj = JsonObjectSchema;
/** Who wrote it, when a graph did: the run (and its thread). */
const Attribution = { run_id: z.string().optional(), thread_id: z.string().optional() };

export const storeEventSchemas = {
  StoreItemPut: z.object({
    namespace: Namespace,
    key: z.string(),
    value: Obj,
    /** ISO 8601 time of the write. */
    at: z.string(),
    /** Time-to-live in minutes (null: kept until deleted). */
    ttl_minutes: z.number().positive().nullable(),
    /** Epoch milliseconds after which the item is gone (null: never). */
    expires_at: z.number().int().nullable(),
    /** Embeddings of the indexed fields, computed when written (a rebuild never calls the embedder). */
    vectors: z.array(z.object({ field: z.string(), vector: z.array(z.number()) })).optional(),
    ...Attribution,
  }),
  StoreItemDeleted: z.object({
    namespace: Namespace,
    key: z.string(),
    at: z.string(),
    reason: z.enum(["delete", "truncate", "erase"]).optional(),
    ...Attribution,
  }),
  /** A read with `refresh_ttl` moved the expiry. */
  StoreItemTtlRefreshed: z.object({ namespace: Namespace, key: z.string(), at: z.string(), expires_at: z.number().int() }),
  /** The sweeper removed an item whose time had come (appended with the item's expected revision). */
  StoreItemExpired: z.object({ namespace: Namespace, key: z.string(), at: z.string(), expires_at: z.number().int() }),
} satisfies Record<string, z.ZodType>;

export type StoreEvent = EventsOf<typeof storeEventSchemas>;
export type StoreVector = { field: string; vector: number[] };

/** One live item as the read model folds it. */
export interface StoreItemState {
  revision: bigint;
  namespace: string[];
  key: string;
  value: JsonObject;
  created_at: string;
  updated_at: string;
  ttl_minutes: number | null;
  expires_at: number | null;
  vectors: StoreVector[];
}

/** Whether the item is past its expiry at `nowMs` (swept or not, it no longer exists for readers). */
export const isExpired = (state: Pick<StoreItemState, "expires_at">, nowMs: number): boolean => state.expires_at !== null && state.expires_at <= nowMs;

/** Pure fold of one item stream; undefined = the item does not exist. */
export function evolveStoreItem(state: StoreItemState | undefined, event: StoreEvent, revision: bigint): StoreItemState | undefined {
  switch (event.type) {
    case "StoreItemPut": {
      const d = event.data;
      // A put over an item whose time had passed (not yet swept) creates a new item.
      const alive = state && !isExpired(state, Date.parse(d.at));
      return {
        revision,
        namespace: d.namespace,
        key: d.key,
        value: d.value as JsonObject,
        created_at: alive ? state.created_at : d.at,
        updated_at: d.at,
        ttl_minutes: d.ttl_minutes,
        expires_at: d.expires_at,
        vectors: d.vectors ?? [],
      };
    }
    case "StoreItemTtlRefreshed":
      return state && { ...state, revision, expires_at: event.data.expires_at };
    case "StoreItemDeleted":
      return undefined;
    case "StoreItemExpired":
      // Only the expiry it was decided on: a later refresh or put keeps the item.
      return state && state.expires_at === event.data.expires_at ? undefined : state && { ...state, revision };
  }
}

// ---------------------------------------------------------------------------------------------
// decisions

export interface Attribution {
  run_id?: string;
  thread_id?: string;
}

export const expiresAt = (ttlMinutes: number | null, nowMs: number): number | null => (ttlMinutes === null ? null : nowMs + Math.round(ttlMinutes * 60_000));

export function decidePut(
  cmd: { namespace: string[]; key: string; value: JsonObject; ttl_minutes: number | null; vectors?: StoreVector[] },
  nowMs: number,
  by: Attribution = {},
): EventData[] {
  const data: Record<string, unknown> = {
    namespace: cmd.namespace,
    key: cmd.key,
    value: cmd.value,
    at: isoOf(nowMs),
    ttl_minutes: cmd.ttl_minutes,
    expires_at: expiresAt(cmd.ttl_minutes, nowMs),
    ...by,
  };
  if (cmd.vectors?.length) data.vectors = cmd.vectors;
  return [{ type: "StoreItemPut", data }];
}

/** Deleting a missing (or expired) item changes nothing. */
export function decideDelete(state: StoreItemState | undefined, nowMs: number, by: Attribution = {}, reason?: "truncate" | "erase"): EventData[] {
  if (!state || isExpired(state, nowMs)) return [];
  return [{ type: "StoreItemDeleted", data: { namespace: state.namespace, key: state.key, at: isoOf(nowMs), ...(reason ? { reason } : {}), ...by } }];
}

/** A read with refresh moves the expiry of a live item that has a TTL; others are left alone. */
export function decideRefresh(state: StoreItemState | undefined, nowMs: number): EventData[] {
  if (!state || state.ttl_minutes === null || isExpired(state, nowMs)) return [];
  const next = expiresAt(state.ttl_minutes, nowMs)!;
  if (next === state.expires_at) return [];
  return [{ type: "StoreItemTtlRefreshed", data: { namespace: state.namespace, key: state.key, at: isoOf(nowMs), expires_at: next } }];
}

export function decideExpire(state: StoreItemState | undefined, nowMs: number): EventData[] {
  if (!state || !isExpired(state, nowMs)) return [];
  return [{ type: "StoreItemExpired", data: { namespace: state.namespace, key: state.key, at: isoOf(nowMs), expires_at: state.expires_at } }];
}

/** ISO 8601 with UTC offset, like every other timestamp of the API. */
export { isoOf };

// ---------------------------------------------------------------------------------------------
// namespaces

/** The official server's message for a label that is empty or holds a period (422). */
export function namespaceError(namespace: readonly string[], options: { allowEmpty?: boolean } = {}): string | undefined {
  if (namespace.length === 0) return options.allowEmpty ? undefined : "Namespace is required";
  for (const label of namespace) {
    if (!label || label.includes(".")) return `Namespace labels cannot be empty or contain periods. Received: ${namespace.join(".")}`;
  }
  return undefined;
}

/**
 * The namespace as one sortable text: every label followed by `.` (`["a","b"]` → `a.b.`). Labels
 * never hold a period, so the namespaces under a prefix are exactly the texts in
 * [`a.`, `a/`) — an index range.
 */
export const namespacePath = (namespace: readonly string[]): string => namespace.map((l) => `${l}.`).join("");

// ---------------------------------------------------------------------------------------------
// search filters

export const FILTER_OPERATORS = ["$eq", "$ne", "$gt", "$gte", "$lt", "$lte"] as const;
export type FilterOperator = (typeof FILTER_OPERATORS)[number];

/** One condition on a top-level field of an item's value. */
export interface ValueCondition {
  field: string;
  op: FilterOperator | "contains";
  value: unknown;
}

/**
 * `{field: value}` (equality; an object or array value must be contained) or
 * `{field: {$op: value, ...}}` with the comparison operators. Throws with a message naming
 * the field for anything else.
 */
export function parseValueFilter(filter: Record<string, unknown>): ValueCondition[] {
  const out: ValueCondition[] = [];
  for (const [field, spec] of Object.entries(filter)) {
    if (field.includes('"')) throw new Error(`filter.${field}: field names cannot contain '"'`);
    const isObj = typeof spec === "object" && spec !== null && !Array.isArray(spec);
    const keys = isObj ? Object.keys(spec) : [];
    if (isObj && keys.length > 0 && keys.some((k) => k.startsWith("$"))) {
      for (const k of keys) {
        if (!(FILTER_OPERATORS as readonly string[]).includes(k))
          throw new Error(`filter.${field}: unsupported operator ${k} (expected one of ${FILTER_OPERATORS.join(", ")})`);
        const v = (spec as Record<string, unknown>)[k];
        if (k !== "$eq" && k !== "$ne" && typeof v !== "number" && typeof v !== "string")
          throw new Error(`filter.${field}.${k}: expected a number or a string`);
        out.push({ field, op: k as FilterOperator, value: v });
      }
    } else if (isObj || Array.isArray(spec)) {
      out.push({ field, op: "contains", value: spec });
    } else {
      out.push({ field, op: "$eq", value: spec });
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// semantic index: the texts of an item to embed

/**
 * The texts at a field path of `value`, as the official stores extract them: `$` is the whole
 * value as JSON; `a.b` descends objects; `a[*]` every element, `a[0]` / `a[-1]` one; strings
 * as they are, numbers and booleans as text, objects and arrays as JSON.
 */
export function textsAtPath(value: unknown, path: string): string[] {
  if (path === "$" || path === "") return [JSON.stringify(value)];
  const tokens = path.split(".").flatMap((part) => {
    const m = /^([^[\]]*)((?:\[[^\]]*\])*)$/.exec(part);
    if (!m) return [part];
    const indexes = m[2].match(/\[[^\]]*\]/g) ?? [];
    return [...(m[1] ? [m[1]] : []), ...indexes];
  });
  const walk = (node: unknown, i: number): string[] => {
    if (node === undefined || node === null) return [];
    if (i === tokens.length) {
      if (typeof node === "string") return [node];
      if (typeof node === "number" || typeof node === "boolean") return [String(node)];
      return [JSON.stringify(node)];
    }
    const token = tokens[i];
    if (token.startsWith("[")) {
      if (!Array.isArray(node)) return [];
      const index = token.slice(1, -1);
      if (index === "*") return node.flatMap((el) => walk(el, i + 1));
      let n = Number.parseInt(index, 10);
      if (Number.isNaN(n)) return [];
      if (n < 0) n += node.length;
      return n >= 0 && n < node.length ? walk(node[n], i + 1) : [];
    }
    if (typeof node !== "object" || Array.isArray(node) || !Object.hasOwn(node, token)) return [];
    return walk((node as Record<string, unknown>)[token], i + 1);
  };
  return walk(value, 0);
}

/** Every (field label, text) an item contributes to the index: `field` for one text, `field.i` for several. */
export function textsToEmbed(value: JsonObject, fields: readonly string[]): { field: string; text: string }[] {
  const out: { field: string; text: string }[] = [];
  for (const field of fields) {
    const texts = textsAtPath(value, field);
    if (texts.length === 1) out.push({ field, text: texts[0] });
    else texts.forEach((text, i) => out.push({ field: `${field}.${i}`, text }));
  }
  return out;
}
