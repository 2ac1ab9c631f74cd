import t from "tap";
import Database from "better-sqlite3";
import { containsSql, FILTER_LIMITS, UnsupportedFilterError } from "../../src/read-models/json-filter.js";
import { DomainError } from "../../src/domain/errors.js";
import { jsonContains } from "../../src/domain/json.js";

/** The SQL containment filter selects exactly the rows the reference (jsonContains, PostgreSQL's @>) does. */
t.test("containsSql agrees with jsonContains on every document", (t) => {
  const db = new Database(":memory:");
  t.teardown(() => db.close());
  db.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, m TEXT)");
  const docs = [
    { a: 1 },
    { a: "1" },
    { a: true },
    { a: false },
    { a: null },
    { a: 1.5 },
    { a: { b: 2, c: [1, 2, { d: "x" }] } },
    { tags: ["x", "y"] },
    { tags: [["n"]] },
    {},
    { "k.e": 1 },
    { a: [1] },
    { 'a"b': 1 },
    { "a\\b": { "\n": 2 } },
    { "": [{ "x\\": true }] },
  ];
  const insert = db.prepare("INSERT INTO t VALUES (?, ?)");
  docs.forEach((d, i) => insert.run(i, JSON.stringify(d)));
  const filters = [
    { a: 1 },
    { a: "1" },
    { a: true },
    { a: false },
    { a: null },
    { a: 1.5 },
    { a: { b: 2 } },
    { a: { c: [{ d: "x" }] } },
    { a: { c: [1, 2] } },
    { a: { c: [3] } },
    { tags: ["y"] },
    { tags: [["n"]] },
    {},
    { "k.e": 1 },
    { a: {} },
    { tags: [] },
    { missing: 1 },
    { a: [1] },
    { a: [] },
    { 'a"b': 1 },
    { "a\\b": { "\n": 2 } },
    { "a\\b": {} },
    { "": [{ "x\\": true }] },
    { "": [{ x: true }] },
  ];
  for (const f of filters) {
    const { sql, params } = containsSql("m", f);
    const got = db
      .prepare(`SELECT id FROM t WHERE ${sql} ORDER BY id`)
      .pluck()
      .all(...params);
    const want = docs.flatMap((d, i) => (jsonContains(d, f) ? [i] : []));
    t.same(got, want, JSON.stringify(f));
  }
  t.end();
});

t.test("a value that is not JSON cannot be filtered on", (t) => {
  t.throws(() => containsSql("m", { a: undefined }), UnsupportedFilterError);
  t.end();
});

t.test("a filter within FILTER_LIMITS is valid SQL at its deepest and widest; one beyond them is refused as bad input", (t) => {
  const db = new Database(":memory:");
  t.teardown(() => db.close());
  db.exec("CREATE TABLE t (m TEXT)");
  const run = (filter: unknown) => {
    const { sql, params } = containsSql("m", filter);
    return db
      .prepare(`SELECT count(*) FROM t WHERE ${sql}`)
      .pluck()
      .get(...params);
  };
  let arrays: unknown = 1;
  for (let i = 0; i < FILTER_LIMITS.maxDepth; i++) arrays = [arrays, i];
  t.equal(run(arrays), 0, "nested arrays at the depth limit");
  t.equal(run(Object.fromEntries(Array.from({ length: FILTER_LIMITS.maxEntries }, (_, i) => [`k${i}`, i]))), 0, "as many keys as allowed");
  const refused = (filter: unknown, why: RegExp) => {
    try {
      containsSql("m", filter);
      t.fail("expected a refusal");
    } catch (error) {
      t.ok(error instanceof DomainError && error.kind === "invalid", "bad input (422), not a fault");
      t.match((error as Error).message, why);
    }
  };
  refused([arrays], /at most 16 levels/);
  refused({ a: Array.from({ length: FILTER_LIMITS.maxEntries }, (_, i) => i) }, /at most 1000 keys and array elements/);
  t.end();
});
