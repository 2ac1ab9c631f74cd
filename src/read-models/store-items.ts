import type Database from "better-sqlite3";
import type { RecordedEvent } from "../eventstore/types.js";
import type { TableProjection } from "./table.js";
import { storeItemsProjection } from "../../projections/store.js";
import {
  namespacePath,
  storeEventSchemas,
  STORE_STREAM_PREFIX,
  type StoreEvent,
  type StoreItemState,
  type StoreVector,
  type ValueCondition,
} from "../domain/store.js";
import type { JsonObject } from "../domain/json.js";
import { and, containsSql, keyPath, type SqlFragment } from "./json-filter.js";
import { StatementCache } from "./statements.js";
import { filtersToSqlOver, type AuthFilters } from "./auth-filters.js";

/**
 * What custom auth's store filters are matched against, as the official server does: the item's
 * value with its `namespace` and `key` set in it (they win over fields of those names).
 */
const ITEM_AUTH_DOC = "json_set(i.value, '$.namespace', json(i.namespace), '$.key', i.key)";

/** For a namespace listing: `{namespace}` alone, cut to `maxDepth` labels when given (what is listed). */
function namespaceAuthDoc(maxDepth: number | undefined): string {
  if (maxDepth === undefined) return "json_object('namespace', json(n.namespace))";
  if (!Number.isInteger(maxDepth) || maxDepth < 1) throw new Error(`maxDepth: not a positive integer: ${maxDepth}`);
  // Spliced as a literal: the expression is repeated for every filter key.
  const cut = `(SELECT json_group_array(j.value ORDER BY j.key) FROM json_each(n.namespace) j WHERE j.key < ${maxDepth})`;
  return `json_object('namespace', json(CASE WHEN n.depth > ${maxDepth} THEN ${cut} ELSE n.namespace END))`;
}

/**
 * Store items as three tables:
 *   store_items       one row per live item; `ns_path` (labels each followed by `.`) makes a
 *                     namespace prefix an index range; `expires_at` (epoch ms) is indexed for the sweeper.
 *   store_vectors     the embeddings of an item's indexed fields (float32 blobs).
 *   store_namespaces  one row per namespace holding items, with their count: what
 *                     POST /store/namespaces lists without touching the items.
 * An expired item stays until the sweeper's StoreItemExpired removes it; every query hides it already.
 */
export const storeItemsTable: TableProjection = {
  name: "store_items",
  version: 1,
  ddl: [
    `CREATE TABLE store_items (
       ns_path TEXT NOT NULL,
       key TEXT NOT NULL,
       namespace TEXT NOT NULL,
       revision INTEGER NOT NULL,
       value TEXT NOT NULL,
       created_at TEXT NOT NULL,
       updated_at TEXT NOT NULL,
       ttl_minutes REAL,
       expires_at INTEGER,
       PRIMARY KEY (ns_path, key)
     ) WITHOUT ROWID`,
    "CREATE INDEX store_items_updated ON store_items (updated_at)",
    "CREATE INDEX store_items_expiry ON store_items (expires_at) WHERE expires_at IS NOT NULL",
    `CREATE TABLE store_vectors (
       ns_path TEXT NOT NULL,
       key TEXT NOT NULL,
       field TEXT NOT NULL,
       vector BLOB NOT NULL,
       PRIMARY KEY (ns_path, key, field)
     ) WITHOUT ROWID`,
    `CREATE TABLE store_namespaces (
       ns_path TEXT PRIMARY KEY,
       namespace TEXT NOT NULL,
       depth INTEGER NOT NULL,
       items INTEGER NOT NULL
     ) WITHOUT ROWID`,
  ],
  streamPrefixes: [STORE_STREAM_PREFIX],
  eventTypes: Object.keys(storeEventSchemas),
  prepare(db) {
    const load = loader(db);
    const upsert = db.prepare(`INSERT INTO store_items (ns_path, key, namespace, revision, value, created_at, updated_at, ttl_minutes, expires_at)
      VALUES (@ns_path, @key, @namespace, @revision, @value, @created_at, @updated_at, @ttl_minutes, @expires_at)
      ON CONFLICT (ns_path, key) DO UPDATE SET revision = excluded.revision, value = excluded.value, created_at = excluded.created_at,
        updated_at = excluded.updated_at, ttl_minutes = excluded.ttl_minutes, expires_at = excluded.expires_at`);
    const remove = db.prepare("DELETE FROM store_items WHERE ns_path = ? AND key = ?");
    const removeVectors = db.prepare("DELETE FROM store_vectors WHERE ns_path = ? AND key = ?");
    const addVector = db.prepare("INSERT INTO store_vectors (ns_path, key, field, vector) VALUES (?, ?, ?, ?)");
    const countUp = db.prepare(`INSERT INTO store_namespaces (ns_path, namespace, depth, items) VALUES (?, ?, ?, 1)
      ON CONFLICT (ns_path) DO UPDATE SET items = items + 1`);
    const countDown = db.prepare("UPDATE store_namespaces SET items = items - 1 WHERE ns_path = ?");
    const dropEmpty = db.prepare("DELETE FROM store_namespaces WHERE ns_path = ? AND items <= 0");
    return (event: RecordedEvent) => {
      // The table folds the store's streams only (`eventTypes`): every event here is a store event.
      const { namespace, key } = (event as RecordedEvent & StoreEvent).data;
      const nsPath = namespacePath(namespace);
      const before = load(nsPath, key);
      const after = storeItemsProjection.evolve(before, event);
      if (!after) {
        if (!before) return;
        remove.run(nsPath, key);
        removeVectors.run(nsPath, key);
        countDown.run(nsPath);
        dropEmpty.run(nsPath);
        return;
      }
      upsert.run({
        ns_path: nsPath,
        key,
        namespace: JSON.stringify(after.namespace),
        revision: after.revision,
        value: JSON.stringify(after.value),
        created_at: after.created_at,
        updated_at: after.updated_at,
        ttl_minutes: after.ttl_minutes,
        expires_at: after.expires_at,
      });
      if (!before) countUp.run(nsPath, JSON.stringify(after.namespace), namespace.length);
      if (event.type === "StoreItemPut") {
        removeVectors.run(nsPath, key);
        for (const v of after.vectors) addVector.run(nsPath, key, v.field, vectorBlob(v.vector));
      }
    };
  },
};

/** float32, little-endian: 4 bytes per dimension. */
export const vectorBlob = (vector: readonly number[]): Buffer => Buffer.from(new Float32Array(vector).buffer);

function vectorOf(blob: Buffer): Float32Array {
  // Copy: the blob's offset in its buffer need not be 4-byte aligned.
  const copy = new Uint8Array(blob);
  return new Float32Array(copy.buffer, 0, copy.byteLength / 4);
}

/** Cosine similarity of two float32 blobs (0 when either is the zero vector or they differ in length). */
export function cosineOfBlobs(a: Buffer, b: Buffer): number {
  if (a.byteLength !== b.byteLength || a.byteLength === 0) return 0;
  const x = vectorOf(a);
  const y = vectorOf(b);
  let dot = 0;
  let nx = 0;
  let ny = 0;
  for (let i = 0; i < x.length; i++) {
    dot += x[i] * y[i];
    nx += x[i] * x[i];
    ny += y[i] * y[i];
  }
  return nx && ny ? dot / Math.sqrt(nx * ny) : 0;
}

interface ItemRow {
  ns_path: string;
  key: string;
  namespace: string;
  revision: number | bigint;
  value: string;
  created_at: string;
  updated_at: string;
  ttl_minutes: number | null;
  expires_at: number | null;
}

const COLUMNS = "i.ns_path, i.key, i.namespace, i.revision, i.value, i.created_at, i.updated_at, i.ttl_minutes, i.expires_at";

function stateOf(r: ItemRow, vectors: StoreVector[] = []): StoreItemState {
  return {
    revision: BigInt(r.revision),
    namespace: JSON.parse(r.namespace),
    key: r.key,
    value: JSON.parse(r.value) as JsonObject,
    created_at: r.created_at,
    updated_at: r.updated_at,
    ttl_minutes: r.ttl_minutes,
    expires_at: r.expires_at === null ? null : Number(r.expires_at),
    vectors,
  };
}

function loader(db: Database.Database): (nsPath: string, key: string) => StoreItemState | undefined {
  const row = db.prepare(`SELECT ${COLUMNS} FROM store_items i WHERE i.ns_path = ? AND i.key = ?`);
  const vectors = db.prepare("SELECT field, vector FROM store_vectors WHERE ns_path = ? AND key = ? ORDER BY field");
  return (nsPath, key) => {
    const r = row.get(nsPath, key) as ItemRow | undefined;
    if (!r) return undefined;
    const vs = (vectors.all(nsPath, key) as { field: string; vector: Buffer }[]).map((v) => ({ field: v.field, vector: Array.from(vectorOf(v.vector)) }));
    return stateOf(r, vs);
  };
}

/** The namespaces under `prefix` (labels taken literally): an index range over `ns_path`. */
function underPrefix(column: string, prefix: readonly string[]): SqlFragment[] {
  if (prefix.length === 0) return [];
  const low = namespacePath(prefix);
  const high = low.slice(0, -1) + "/"; // "." + 1: the first text after every "a.b.…"
  return [{ sql: `${column} >= ? AND ${column} < ?`, params: [low, high] }];
}

/** One condition of a search filter over the JSON `value` column. */
function conditionSql(column: string, c: ValueCondition): SqlFragment {
  if (c.op === "contains" || c.op === "$eq") return containsSql(column, { [c.field]: c.value });
  if (c.op === "$ne") {
    const eq = containsSql(column, { [c.field]: c.value });
    // A missing field is "not equal" too (json_type gives NULL there).
    return { sql: `NOT coalesce((${eq.sql}), 0)`, params: eq.params };
  }
  const path = keyPath("$", c.field);
  const cmp = { $gt: ">", $gte: ">=", $lt: "<", $lte: "<=" }[c.op];
  const types = typeof c.value === "number" ? "('integer', 'real')" : "('text')";
  return { sql: `(json_type(${column}, ?) IN ${types} AND json_extract(${column}, ?) ${cmp} ?)`, params: [path, path, c.value] };
}

export interface StoreSearchQuery {
  namespacePrefix: readonly string[];
  conditions: readonly ValueCondition[];
  limit: number;
  offset: number;
  /** Items expiring at or before this time (epoch ms) are gone. */
  nowMs: number;
  /** Semantic search: rank by cosine similarity of the items' vectors to this one. */
  queryVector?: readonly number[];
  /** Only namespaces under this prefix (the caller's own, under custom auth). */
  within?: readonly string[];
  /** Custom auth's store filters, matched against each item's value, namespace and key. */
  authFilters?: AuthFilters;
}

export interface StoreSearchHit {
  item: StoreItemState;
  /** Best cosine similarity of the item's vectors; null without a query or for an item without vectors. */
  score: number | null;
}

export interface NamespaceQuery {
  prefix?: readonly string[];
  suffix?: readonly string[];
  maxDepth?: number;
  limit: number;
  offset: number;
  within?: readonly string[];
  /** Custom auth's store filters, matched against `{namespace}` (as listed, cut to maxDepth). */
  authFilters?: AuthFilters;
}

/** Queries of the store read model. */
export class StoreReadModel {
  private readonly loadRow: (nsPath: string, key: string) => StoreItemState | undefined;
  private readonly cache: StatementCache;
  private readonly nextExpiryStmt: Database.Statement;
  private readonly expiredStmt: Database.Statement;
  private readonly pageStmt: Database.Statement;

  constructor(db: Database.Database) {
    this.loadRow = loader(db);
    this.cache = new StatementCache(db);
    // Semantic ranking runs in SQL over the candidates the namespace and filter conditions leave.
    db.function("store_cosine", { deterministic: true }, (a: unknown, b: unknown) => (Buffer.isBuffer(a) && Buffer.isBuffer(b) ? cosineOfBlobs(a, b) : null));
    this.nextExpiryStmt = db.prepare("SELECT min(expires_at) FROM store_items WHERE expires_at IS NOT NULL").pluck();
    this.expiredStmt = db.prepare(`SELECT ${COLUMNS} FROM store_items i WHERE i.expires_at IS NOT NULL AND i.expires_at <= ? ORDER BY i.expires_at LIMIT ?`);
    this.pageStmt = db.prepare(`SELECT ${COLUMNS} FROM store_items i WHERE (i.ns_path, i.key) > (?, ?) ORDER BY i.ns_path, i.key LIMIT ?`);
  }

  /** The item as folded, expired or not (what a decision needs). */
  load(namespace: readonly string[], key: string): StoreItemState | undefined {
    return this.loadRow(namespacePath(namespace), key);
  }

  /** The live item (undefined: missing or past its expiry). */
  get(namespace: readonly string[], key: string, nowMs: number): StoreItemState | undefined {
    const s = this.load(namespace, key);
    return s && (s.expires_at === null || s.expires_at > nowMs) ? s : undefined;
  }

  search(q: StoreSearchQuery): StoreSearchHit[] {
    const where: SqlFragment[] = [
      ...underPrefix("i.ns_path", q.namespacePrefix),
      ...underPrefix("i.ns_path", q.within ?? []),
      { sql: "(i.expires_at IS NULL OR i.expires_at > ?)", params: [q.nowMs] },
      ...q.conditions.map((c) => conditionSql("i.value", c)),
      ...(q.authFilters ? [filtersToSqlOver(q.authFilters, ITEM_AUTH_DOC)] : []),
    ];
    const w = and(where);
    let rows: (ItemRow & { score: number | null })[];
    if (q.queryVector) {
      const sql = `SELECT ${COLUMNS}, (SELECT max(store_cosine(v.vector, ?)) FROM store_vectors v WHERE v.ns_path = i.ns_path AND v.key = i.key) AS score
        FROM store_items i WHERE ${w.sql} ORDER BY score IS NULL, score DESC, i.updated_at DESC, i.ns_path, i.key LIMIT ? OFFSET ?`;
      rows = this.cache.get(sql).all(vectorBlob(q.queryVector), ...w.params, q.limit, q.offset) as typeof rows;
    } else {
      const sql = `SELECT ${COLUMNS}, NULL AS score FROM store_items i WHERE ${w.sql} ORDER BY i.updated_at DESC, i.ns_path, i.key LIMIT ? OFFSET ?`;
      rows = this.cache.get(sql).all(...w.params, q.limit, q.offset) as typeof rows;
    }
    return rows.map((r) => ({ item: stateOf(r), score: r.score }));
  }

  /**
   * Distinct namespaces holding items, sorted, matching the prefix and suffix (`*` matches any
   * one label), each cut to `maxDepth` labels when given.
   */
  listNamespaces(q: NamespaceQuery): string[][] {
    const where: SqlFragment[] = [{ sql: "n.items > 0", params: [] }, ...underPrefix("n.ns_path", q.within ?? [])];
    const prefix = q.prefix ?? [];
    if (prefix.length && !prefix.includes("*")) where.push(...underPrefix("n.ns_path", prefix));
    else if (prefix.length) {
      where.push({ sql: "n.depth >= ?", params: [prefix.length] });
      prefix.forEach((label, i) => label !== "*" && where.push({ sql: "json_extract(n.namespace, ?) = ?", params: [`$[${i}]`, label] }));
    }
    const suffix = q.suffix ?? [];
    if (suffix.length) {
      where.push({ sql: "n.depth >= ?", params: [suffix.length] });
      suffix.forEach((label, j) => {
        // Label j of the suffix is label (depth - len + j) of the namespace.
        if (label !== "*") where.push({ sql: "json_extract(n.namespace, printf('$[%d]', n.depth - ?)) = ?", params: [suffix.length - j, label] });
      });
    }
    if (q.authFilters) where.push(filtersToSqlOver(q.authFilters, namespaceAuthDoc(q.maxDepth)));
    const w = and(where);
    let sql: string;
    let params: unknown[];
    if (q.maxDepth !== undefined) {
      sql = `SELECT DISTINCT CASE WHEN n.depth > ? THEN (SELECT group_concat(j.value || '.', '' ORDER BY j.key) FROM json_each(n.namespace) j WHERE j.key < ?) ELSE n.ns_path END AS p
        FROM store_namespaces n WHERE ${w.sql} ORDER BY p LIMIT ? OFFSET ?`;
      params = [q.maxDepth, q.maxDepth, ...w.params, q.limit, q.offset];
    } else {
      sql = `SELECT n.ns_path AS p FROM store_namespaces n WHERE ${w.sql} ORDER BY p LIMIT ? OFFSET ?`;
      params = [...w.params, q.limit, q.offset];
    }
    return (
      this.cache
        .get(sql)
        .pluck()
        .all(...params) as string[]
    ).map((p) => p.split(".").slice(0, -1));
  }

  /** The earliest expiry of any item (epoch ms), or undefined when none has a TTL. */
  nextExpiry(): number | undefined {
    const v = this.nextExpiryStmt.get() as number | bigint | null;
    return v === null || v === undefined ? undefined : Number(v);
  }

  /** Items whose expiry is at or before `nowMs`, earliest first. */
  expired(nowMs: number, limit: number): StoreItemState[] {
    return (this.expiredStmt.all(nowMs, limit) as ItemRow[]).map((r) => stateOf(r));
  }

  /** Every item, expired or not, whose namespace starts with `prefix` (non-empty): a user's erasure. */
  itemsUnder(prefix: readonly string[]): { namespace: string[]; key: string }[] {
    const [range] = underPrefix("ns_path", prefix);
    if (!range) throw new Error("itemsUnder: the prefix must not be empty");
    const rows = this.cache.get(`SELECT namespace, key FROM store_items WHERE ${range.sql} ORDER BY ns_path, key`).all(...range.params) as {
      namespace: string;
      key: string;
    }[];
    return rows.map((r) => ({ namespace: JSON.parse(r.namespace) as string[], key: r.key }));
  }

  /** Every item, expired or not, in key order after `after` (for the development truncate). */
  page(after: { nsPath: string; key: string } | undefined, limit: number): StoreItemState[] {
    return (this.pageStmt.all(after?.nsPath ?? "", after?.key ?? "", limit) as ItemRow[]).map((r) => stateOf(r));
  }
}
