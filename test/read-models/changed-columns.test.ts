import Database from "better-sqlite3";
import t from "tap";
import { ChangedColumnsWriter, flag, json, type ColumnOf } from "../../src/read-models/changed-columns.js";

interface Item {
  name: string;
  done: boolean;
  tags: string[];
  owner: string;
}

const COLUMNS: readonly ColumnOf<Item>[] = [
  { name: "name", get: (s) => s.name },
  { name: "done", get: (s) => s.done, store: flag },
  { name: "tags", get: (s) => s.tags, store: json },
  { name: "owner", get: (s) => s.owner, insertOnly: true },
];

/** A table like the read models', with a trigger per column: an `UPDATE OF col` trigger fires only when the UPDATE names col. */
function table() {
  const db = new Database(":memory:");
  db.exec(`CREATE TABLE items (id TEXT PRIMARY KEY, name TEXT, done INTEGER, tags TEXT, owner TEXT);
    CREATE INDEX items_name ON items (name); CREATE INDEX items_done ON items (done, id);
    CREATE TABLE named (col TEXT);`);
  for (const c of ["name", "done", "tags", "owner"])
    db.exec(`CREATE TRIGGER named_${c} AFTER UPDATE OF ${c} ON items BEGIN INSERT INTO named VALUES ('${c}'); END`);
  /** The columns named by the updates since the last call. */
  const named = () => {
    const columns = db.prepare("SELECT col FROM named").pluck().all() as string[];
    db.exec("DELETE FROM named");
    return columns;
  };
  const row = (id: string) => db.prepare("SELECT name, done, tags, owner FROM items WHERE id = ?").get(id);
  return { db, named, row };
}

t.test("an update names only the columns whose value changed; the row ends as the state says", async (t) => {
  const { db, named, row } = table();
  t.teardown(() => db.close());
  const writer = new ChangedColumnsWriter<Item>(db, "items", "id", COLUMNS);
  const first: Item = { name: "a", done: false, tags: ["x"], owner: "ann" };
  writer.write("1", undefined, first);
  t.same(row("1"), { name: "a", done: 0, tags: '["x"]', owner: "ann" }, "inserted with every column");

  const renamed = { ...first, name: "b" };
  writer.write("1", first, renamed);
  t.same(named(), ["name"], "only name is named: tags (same array) and done (same value) are not");
  t.same(row("1"), { name: "b", done: 0, tags: '["x"]', owner: "ann" });

  const retagged = { ...renamed, done: true, tags: ["x", "y"] };
  writer.write("1", renamed, retagged);
  t.same(named().sort(), ["done", "tags"]);
  t.same(row("1"), { name: "b", done: 1, tags: '["x","y"]', owner: "ann" });

  writer.write("1", retagged, { ...retagged });
  t.same(named(), [], "nothing changed: no statement at all");

  writer.write("1", retagged, { ...retagged, tags: ["x", "y"], owner: "bob" });
  t.same(named(), ["tags"], "an equal but new array is written (reference compare: never a missed change); the insert-only owner is not");
  t.same(row("1"), { name: "b", done: 1, tags: '["x","y"]', owner: "ann" }, "the owner stays what the row was created with");
});

t.test("an entity new to the batch whose row exists is upserted, insert-only columns kept", async (t) => {
  const { db, row } = table();
  t.teardown(() => db.close());
  const writer = new ChangedColumnsWriter<Item>(db, "items", "id", COLUMNS);
  writer.write("1", undefined, { name: "a", done: false, tags: [], owner: "ann" });
  writer.write("1", undefined, { name: "c", done: true, tags: ["z"], owner: "bob" });
  t.same(row("1"), { name: "c", done: 1, tags: '["z"]', owner: "ann" });
});

t.test("more shapes of change than are kept prepared: the rest are written whole, and correctly", async (t) => {
  const wide: ColumnOf<number[]>[] = Array.from({ length: 8 }, (_, i) => ({ name: `c${i}`, get: (s: number[]) => s[i] }));
  const db = new Database(":memory:");
  t.teardown(() => db.close());
  db.exec(`CREATE TABLE w (id TEXT PRIMARY KEY, ${wide.map((c) => `${c.name} INTEGER`).join(", ")})`);
  const writer = new ChangedColumnsWriter<number[]>(db, "w", "id", wide);
  let state = Array.from({ length: 8 }, () => 0);
  writer.write("w", undefined, state);
  // Every one of the 255 non-empty sets of changed columns, in turn.
  for (let mask = 1; mask < 256; mask++) {
    const next = state.map((v, i) => (mask & (1 << i) ? v + 1 : v));
    writer.write("w", state, next);
    state = next;
    const stored = Object.values(db.prepare("SELECT * FROM w").get() as Record<string, number>).slice(1);
    if (JSON.stringify(stored) !== JSON.stringify(state)) {
      t.fail(`after mask ${mask}: ${JSON.stringify(stored)} != ${JSON.stringify(state)}`);
      return;
    }
  }
  t.pass("the row matched the state after each of 255 updates");
});
