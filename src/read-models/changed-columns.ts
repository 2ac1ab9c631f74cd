import type Database from "better-sqlite3";

/** One column of an entity's row: its value in a state, and how that value is stored. */
export interface ColumnOf<S> {
  name: string;
  /** The value in the state: compared with Object.is, so a JSON column gives the object itself (unchanged = same reference). */
  get: (state: S) => unknown;
  /** The stored form (JSON text, 0/1, null for absent); the value itself when omitted. */
  store?: (value: unknown) => unknown;
  /** Written when the row is inserted, never changed after (the row keeps what it was created with). */
  insertOnly?: boolean;
}

/** More distinct sets of changed columns than this, and the rest are written with every column. */
const MAX_SHAPES = 64;

/**
 * Writes an entity's row, and on an update sets only the columns whose value changed. SQLite
 * rewrites an index whenever an UPDATE names one of its columns or a column of its WHERE clause,
 * whether the value changed or not: an upsert that sets every column dirties the page of every
 * index on every write (a thread's status change rewrote its created-at and expiry index entries
 * too). Naming only what changed leaves those pages alone, and unchanged JSON (a thread's values,
 * its metadata) is not serialised again either.
 *
 * `before` must be the row as stored (loaded from the table): an update assumes the row exists.
 */
export class ChangedColumnsWriter<S> {
  private readonly insert: Database.Statement;
  private readonly shapes = new Map<number, Database.Statement>();

  constructor(
    private readonly db: Database.Database,
    private readonly table: string,
    private readonly key: string,
    private readonly columns: readonly ColumnOf<S>[],
  ) {
    if (columns.length > 30) throw new RangeError(`${table}: at most 30 columns (a bit mask each)`);
    const names = [key, ...columns.map((c) => quote(c.name))];
    // An entity new to the batch may still have a row (a rebuild replaying over a kept row): the upsert sets every column but the insert-only ones.
    const updatable = columns.filter((c) => !c.insertOnly).map((c) => `${quote(c.name)} = excluded.${quote(c.name)}`);
    this.insert = db.prepare(
      `INSERT INTO ${table} (${names.join(", ")}) VALUES (${names.map(() => "?").join(", ")})
       ON CONFLICT (${key}) DO UPDATE SET ${updatable.join(", ")}`,
    );
  }

  write(id: string, before: S | undefined, after: S): void {
    if (before === undefined) {
      this.insert.run(id, ...this.columns.map((c) => stored(c, c.get(after))));
      return;
    }
    let mask = 0;
    const values: unknown[] = [];
    for (let i = 0; i < this.columns.length; i++) {
      const c = this.columns[i];
      if (c.insertOnly) continue;
      const value = c.get(after);
      if (Object.is(value, c.get(before))) continue;
      mask |= 1 << i;
      values.push(stored(c, value));
    }
    if (mask === 0) return;
    const update = this.updateFor(mask);
    if (update) update.run(...values, id);
    else this.insert.run(id, ...this.columns.map((c) => stored(c, c.get(after))));
  }

  private updateFor(mask: number): Database.Statement | undefined {
    let statement = this.shapes.get(mask);
    if (statement || this.shapes.size >= MAX_SHAPES) return statement;
    const set = this.columns.filter((_, i) => mask & (1 << i)).map((c) => `${quote(c.name)} = ?`);
    statement = this.db.prepare(`UPDATE ${this.table} SET ${set.join(", ")} WHERE ${this.key} = ?`);
    this.shapes.set(mask, statement);
    return statement;
  }
}

function stored<S>(column: ColumnOf<S>, value: unknown): unknown {
  return column.store ? column.store(value) : value;
}

/** `values` is a keyword in SQLite. */
function quote(name: string): string {
  return `"${name}"`;
}

/** JSON text of a value that is always present. */
export const json = (value: unknown): string => JSON.stringify(value);
/** JSON text, or NULL for an absent (undefined or null) value. */
export const jsonOrNull = (value: unknown): string | null => (value === undefined || value === null ? null : JSON.stringify(value));
/** SQLite has no booleans. */
export const flag = (value: unknown): number => (value ? 1 : 0);
/** NULL for an absent value. */
export const orNull = (value: unknown): unknown => value ?? null;
