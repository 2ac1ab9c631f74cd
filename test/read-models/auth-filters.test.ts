import t from "tap";
import Database from "better-sqlite3";
import { filterMatches, filtersToSql, parseFilters, type AuthFilters } from "../../src/read-models/auth-filters.js";

/** The same filters, checked row by row in JS and as a WHERE fragment in a real SQLite. */

const rows: Record<string, unknown>[] = [
  { owner: "alice", team: ["red", "blue"], n: 1, ok: true },
  { owner: "bob", team: ["blue"], n: 2, ok: false },
  { owner: "alice", team: "red", n: 1.0, nothing: null },
  { owner: 1, team: [1, "1", true, null], n: "1" },
  { "dotted.key": "x", owner: "carol", team: [] },
  {},
];

const cases: [string, AuthFilters, number[]][] = [
  ["plain equality", { owner: "alice" }, [0, 2]],
  ["$eq", { owner: { $eq: "bob" } }, [1]],
  ["number", { n: 1 }, [0, 2]],
  ["number is not its string", { n: "1" }, [3]],
  ["string is not its number", { owner: 1 }, [3]],
  ["boolean true", { ok: true }, [0]],
  ["boolean false", { ok: false }, [1]],
  ["null", { nothing: null }, [2]],
  ["$contains one", { team: { $contains: "blue" } }, [0, 1]],
  ["$contains all of a list", { team: { $contains: ["red", "blue"] } }, [0]],
  ["$contains needs an array", { team: { $contains: "red" } }, [0]],
  ["$contains typed", { team: { $contains: 1 } }, [3]],
  ["$contains boolean and null", { team: { $contains: [true, null] } }, [3]],
  ["keys are ANDed", { owner: "alice", n: 1, ok: true }, [0]],
  ["a dotted key is one key", { "dotted.key": "x" }, [4]],
  ["missing key", { nobody: "x" }, []],
  ["empty filters", {}, [0, 1, 2, 3, 4, 5]],
];

t.test("filterMatches and filtersToSql agree on every row", async (t) => {
  const db = new Database(":memory:");
  t.teardown(() => db.close());
  db.exec("CREATE TABLE things (id INTEGER PRIMARY KEY, metadata TEXT NOT NULL)");
  const insert = db.prepare("INSERT INTO things (id, metadata) VALUES (?, ?)");
  rows.forEach((row, i) => insert.run(i, JSON.stringify(row)));
  for (const [name, filters, expected] of cases) {
    const js = rows.flatMap((row, i) => (filterMatches(row, filters) ? [i] : []));
    t.same(js, expected, `${name}: filterMatches`);
    const { sql, params } = filtersToSql(filters, "things.metadata");
    const ids = (db.prepare(`SELECT id FROM things WHERE ${sql} ORDER BY id`).all(...params) as { id: number }[]).map((r) => r.id);
    t.same(ids, expected, `${name}: filtersToSql (${sql})`);
  }
});

t.test("filtersToSql composes with other conditions and counts", async (t) => {
  const db = new Database(":memory:");
  t.teardown(() => db.close());
  db.exec("CREATE TABLE threads (thread_id TEXT PRIMARY KEY, status TEXT, metadata TEXT)");
  const insert = db.prepare("INSERT INTO threads VALUES (?, ?, ?)");
  insert.run("a", "idle", JSON.stringify({ owner: "alice" }));
  insert.run("b", "busy", JSON.stringify({ owner: "alice" }));
  insert.run("c", "idle", JSON.stringify({ owner: "bob" }));
  insert.run("d", "idle", null);
  const { sql, params } = filtersToSql({ owner: "alice" }, "metadata");
  const count = db.prepare(`SELECT count(*) AS n FROM threads WHERE status = ? AND ${sql}`).get("idle", ...params) as { n: number };
  t.equal(count.n, 1);
  const none = filtersToSql(undefined, "metadata");
  t.same(none, { sql: "1", params: [] });
  t.equal((db.prepare(`SELECT count(*) AS n FROM threads WHERE ${none.sql}`).get() as { n: number }).n, 4);
});

t.test("filtersToSql refuses a column that is not an identifier", async (t) => {
  t.throws(() => filtersToSql({ a: "b" }, "metadata; DROP TABLE x"), /not a column name/);
});

t.test("values are data, never SQL", async (t) => {
  const db = new Database(":memory:");
  t.teardown(() => db.close());
  db.exec("CREATE TABLE t (metadata TEXT)");
  db.prepare("INSERT INTO t VALUES (?)").run(JSON.stringify({ owner: "x' OR '1'='1" }));
  const { sql, params } = filtersToSql({ owner: "x' OR '1'='1", "it's": { $contains: "'" } }, "metadata");
  t.equal((db.prepare(`SELECT count(*) AS n FROM t WHERE ${sql}`).get(...params) as { n: number }).n, 0);
});

t.test("parseFilters accepts the documented shapes and names what is wrong", async (t) => {
  t.same(parseFilters({ owner: "a", team: { $contains: ["x"] }, n: { $eq: 2 } }), { owner: "a", team: { $contains: ["x"] }, n: { $eq: 2 } });
  t.throws(() => parseFilters({ owner: { $in: ["a"] } }), /owner/);
  t.throws(() => parseFilters({ owner: { nested: "a" } }), /owner/);
  t.throws(() => parseFilters({ 'a"b': "x" }), /a"b/);
  t.throws(() => parseFilters(["owner"]), /expected/);
  t.throws(() => parseFilters({ team: { $contains: [] } }), /team/);
});

t.test("no metadata only passes no filters", async (t) => {
  t.ok(filterMatches(undefined, undefined));
  t.ok(filterMatches(null, {}));
  t.notOk(filterMatches(undefined, { owner: "a" }));
  t.notOk(filterMatches(["owner"], { owner: "a" }));
});
