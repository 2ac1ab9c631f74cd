import t from "tap";
import Database from "better-sqlite3";
import { containsSql, UnsupportedFilterError } from "../src/read-models/json-filter.js";
import { jsonContains } from "../src/domain/json.js";

/** The SQL containment filter selects exactly the rows the reference (jsonContains, PostgreSQL's @>) does. */
t.test("containsSql agrees with jsonContains on every document", (t) => {
  const db = new Database(":memory:");
  t.teardown(() => db.close());
  db.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, m TEXT)");
  const docs = [
    { a: 1 }, { a: "1" }, { a: true }, { a: false }, { a: null }, { a: 1.5 },
    { a: { b: 2, c: [1, 2, { d: "x" }] } }, { tags: ["x", "y"] }, { tags: [["n"]] }, {}, { "k.e": 1 }, { a: [1] },
  ];
  const insert = db.prepare("INSERT INTO t VALUES (?, ?)");
  docs.forEach((d, i) => insert.run(i, JSON.stringify(d)));
  const filters = [
    { a: 1 }, { a: "1" }, { a: true }, { a: false }, { a: null }, { a: 1.5 }, { a: { b: 2 } }, { a: { c: [{ d: "x" }] } },
    { a: { c: [1, 2] } }, { a: { c: [3] } }, { tags: ["y"] }, { tags: [["n"]] }, {}, { "k.e": 1 }, { a: {} }, { tags: [] },
    { missing: 1 }, { a: [1] }, { a: [] },
  ];
  for (const f of filters) {
    const { sql, params } = containsSql("m", f);
    const got = db.prepare(`SELECT id FROM t WHERE ${sql} ORDER BY id`).pluck().all(...params);
    const want = docs.flatMap((d, i) => (jsonContains(d, f) ? [i] : []));
    t.same(got, want, JSON.stringify(f));
  }
  t.end();
});

t.test("keys that cannot be expressed as a JSON path are refused, not misread", (t) => {
  t.throws(() => containsSql("m", { 'a"b': 1 }), UnsupportedFilterError);
  t.end();
});
