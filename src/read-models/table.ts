import type Database from "better-sqlite3";
import type { RecordedEvent } from "../eventstore/types.js";

/**
 * One read model stored as indexed tables in the read-model database (`DATA_DIR/read-models.sqlite`).
 * The pure fold lives in `projections/`; this adapter only writes its output.
 *
 * The runner feeds `apply` every event that passes the store-side filter (`streamPrefixes` AND
 * `eventTypes`), in log order, synchronously, inside the batch transaction that also stores the
 * runner's position: a crash can never separate a row from the position it reflects.
 */
export interface TableProjection {
  /** Unique name; also the prefix of its tables. */
  readonly name: string;
  /** Bump when the tables or the fold change: the whole read-model database is then rebuilt from the log. */
  readonly version: number;
  /** `CREATE TABLE` / `CREATE INDEX` statements (run once on a fresh database). */
  readonly ddl: readonly string[];
  /** Store-side filter: events of streams starting with one of these prefixes… */
  readonly streamPrefixes: readonly string[];
  /** …and of one of these types (never RunOutput or checkpoint blobs, which projections do not need). */
  readonly eventTypes: readonly string[];
  /**
   * Prepares statements once the tables exist; returns the function that folds one event into
   * them, or that function with a `flush` the store calls before each batch commits (for adapters
   * that keep the batch's changed entities until then, see BatchedEntities).
   */
  prepare(db: Database.Database): ((event: RecordedEvent) => void) | TableWriter;
}

export interface TableWriter {
  apply(event: RecordedEvent): void;
  flush(): void;
}
