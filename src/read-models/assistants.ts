import type Database from "better-sqlite3";
import type { RecordedEvent } from "../eventstore/types.js";
import type { TableProjection } from "./table.js";
import { BatchedEntities } from "./batch.js";
import { assistantsProjection } from "../../projections/assistants.js";
import { ASSISTANT_STREAM_PREFIX, assistantEventSchemas, type Assistant, type AssistantState, type AssistantVersion } from "../domain/assistants.js";
import type { JsonObject } from "../domain/json.js";
import { metadataIndexDdl, metadataSource, prepareMetadataIndex, type FilteredSource } from "./metadata-index.js";
import { containsSql, type SqlFragment } from "./json-filter.js";
import { pageAndCount, countWhere, StatementCache, type SortOrder } from "./statements.js";

/** Assistants (current version per row, every version in `assistant_versions`); deleted ones stay as tombstones with their revision. */
export const assistantsTable: TableProjection = {
  name: "assistants",
  version: 2,
  ddl: [
    `CREATE TABLE assistants (
       assistant_id TEXT PRIMARY KEY,
       revision INTEGER NOT NULL,
       deleted INTEGER NOT NULL,
       graph_id TEXT NOT NULL,
       name TEXT NOT NULL,
       created_at TEXT NOT NULL,
       updated_at TEXT NOT NULL,
       metadata TEXT NOT NULL,
       data TEXT NOT NULL
     )`,
    "CREATE INDEX assistants_created ON assistants (created_at) WHERE deleted = 0",
    "CREATE INDEX assistants_updated ON assistants (updated_at) WHERE deleted = 0",
    "CREATE INDEX assistants_graph ON assistants (graph_id, created_at) WHERE deleted = 0",
    "CREATE INDEX assistants_name ON assistants (name) WHERE deleted = 0",
    `CREATE TABLE assistant_versions (
       assistant_id TEXT NOT NULL,
       version INTEGER NOT NULL,
       metadata TEXT NOT NULL,
       data TEXT NOT NULL,
       PRIMARY KEY (assistant_id, version)
     ) WITHOUT ROWID`,
    ...metadataIndexDdl("assistants"),
  ],
  streamPrefixes: [ASSISTANT_STREAM_PREFIX],
  eventTypes: Object.keys(assistantEventSchemas),
  prepare(db) {
    const load = loader(db);
    const upsert = db.prepare(`INSERT INTO assistants (assistant_id, revision, deleted, graph_id, name, created_at, updated_at, metadata, data)
      VALUES (@assistant_id, @revision, @deleted, @graph_id, @name, @created_at, @updated_at, @metadata, @data)
      ON CONFLICT (assistant_id) DO UPDATE SET revision = excluded.revision, deleted = excluded.deleted, graph_id = excluded.graph_id,
        name = excluded.name, created_at = excluded.created_at, updated_at = excluded.updated_at, metadata = excluded.metadata, data = excluded.data`);
    const dropVersions = db.prepare("DELETE FROM assistant_versions WHERE assistant_id = ?");
    const insertVersion = db.prepare("INSERT INTO assistant_versions (assistant_id, version, metadata, data) VALUES (?, ?, ?, ?)");
    const index = prepareMetadataIndex(db, "assistants");
    const write = (id: string, before: AssistantState | undefined, after: AssistantState | undefined) => {
      if (!after) return;
      const a = after.current;
      upsert.run({
        assistant_id: id,
        revision: after.revision,
        deleted: after.deleted ? 1 : 0,
        graph_id: a.graph_id,
        name: a.name,
        created_at: a.created_at,
        updated_at: a.updated_at,
        metadata: JSON.stringify(a.metadata),
        data: JSON.stringify(a),
      });
      // Versions only ever grow while the assistant lives; a delete or a re-creation rewrites them.
      const grows =
        before &&
        !before.deleted &&
        !after.deleted &&
        after.versions.length >= before.versions.length &&
        after.versions[0].created_at === before.versions[0].created_at;
      if (!grows) dropVersions.run(id);
      if (!after.deleted) {
        for (const v of after.versions.slice(grows ? before!.versions.length : 0))
          insertVersion.run(id, v.version, JSON.stringify(v.metadata), JSON.stringify(v));
      }
      index.replace(id, after.deleted ? undefined : a.metadata, !before);
    };
    const entities = new BatchedEntities<AssistantState>(load, write);
    return {
      apply: (event: RecordedEvent) =>
        entities.update(event.streamId.slice(ASSISTANT_STREAM_PREFIX.length), (state) => assistantsProjection.evolve(state, event)),
      flush: () => entities.flush(),
    };
  },
};

/** Loads an assistant's folded state (undefined: never created). */
function loader(db: Database.Database): (id: string) => AssistantState | undefined {
  const row = db.prepare("SELECT revision, deleted, data FROM assistants WHERE assistant_id = ?");
  const versions = db.prepare("SELECT data FROM assistant_versions WHERE assistant_id = ? ORDER BY version").pluck();
  return (id) => {
    const r = row.get(id) as { revision: number | bigint; deleted: number; data: string } | undefined;
    if (!r) return undefined;
    return {
      revision: BigInt(r.revision),
      deleted: r.deleted === 1,
      current: JSON.parse(r.data) as Assistant,
      versions: (versions.all(id) as string[]).map((v) => JSON.parse(v) as AssistantVersion),
    };
  };
}

export type AssistantSortField = "assistant_id" | "graph_id" | "name" | "created_at" | "updated_at";

export interface AssistantFilter {
  metadata?: JsonObject;
  graph_id?: string;
  /** Case-insensitive substring of the name. */
  name?: string;
  /** Extra conditions (e.g. the custom-auth filters) over the `metadata` column. */
  extra?: readonly SqlFragment[];
}

/** Queries of the assistants read model. */
export class AssistantsReadModel {
  readonly load: (id: string) => AssistantState | undefined;
  private readonly cache: StatementCache;

  constructor(db: Database.Database) {
    this.load = loader(db);
    this.cache = new StatementCache(db);
  }

  /** The live assistant, or undefined (unknown or deleted). */
  get(id: string): Assistant | undefined {
    const r = this.cache.get("SELECT data FROM assistants WHERE assistant_id = ? AND deleted = 0").pluck().get(id) as string | undefined;
    return r === undefined ? undefined : (JSON.parse(r) as Assistant);
  }

  search(q: AssistantFilter & { sort_by?: AssistantSortField; sort_order?: SortOrder; limit: number; offset: number }): { page: Assistant[]; total: number } {
    const source = sourceOf(q);
    const { rows, total } = pageAndCount(this.cache, source.from, "assistants.data", "assistants.assistant_id", {
      where: source.where,
      sortColumn: `assistants.${q.sort_by ?? "created_at"}`,
      sortOrder: q.sort_order ?? "desc",
      limit: q.limit,
      offset: q.offset,
    });
    return { page: (rows as { data: string }[]).map((r) => JSON.parse(r.data) as Assistant), total };
  }

  count(q: AssistantFilter): number {
    const source = sourceOf(q);
    return countWhere(this.cache, source.from, source.where);
  }

  /** Versions of a live assistant, newest first. */
  versions(id: string, q: { metadata?: JsonObject; limit: number; offset: number }): AssistantVersion[] {
    const where: SqlFragment[] = [{ sql: "assistant_id = ?", params: [id] }];
    if (q.metadata) where.push(containsSql("metadata", q.metadata));
    const sql = `SELECT data FROM assistant_versions WHERE ${where.map((w) => `(${w.sql})`).join(" AND ")} ORDER BY version DESC LIMIT ? OFFSET ?`;
    return (
      this.cache
        .get(sql)
        .pluck()
        .all(...where.flatMap((w) => w.params), q.limit, q.offset) as string[]
    ).map((d) => JSON.parse(d) as AssistantVersion);
  }
}

function sourceOf(q: AssistantFilter): FilteredSource {
  const source = metadataSource("assistants", "assistant_id", "metadata", q.metadata);
  const where: SqlFragment[] = [{ sql: "assistants.deleted = 0", params: [] }, ...source.where];
  if (q.graph_id !== undefined) where.push({ sql: "assistants.graph_id = ?", params: [q.graph_id] });
  if (q.name !== undefined) where.push({ sql: "instr(lower(assistants.name), ?) > 0", params: [q.name.toLowerCase()] });
  if (q.extra) where.push(...q.extra);
  return { from: source.from, where };
}
