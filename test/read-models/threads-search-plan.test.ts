import type Database from "better-sqlite3";
import t from "tap";
import { ThreadsReadModel } from "../../src/read-models/threads.js";
import { startTestServer } from "../support/server.js";

/**
 * A metadata search reads the metadata index in the page's order (created_at, the default sort) and
 * only the page's threads; its count reads the index alone. Checked on SQLite's own plans
 * (EXPLAIN QUERY PLAN), beside the answers a plain query over the threads table gives.
 */

/** The read model over `db`, with the SQL of every statement it prepares recorded. */
function recorded(db: Database.Database): { threads: ThreadsReadModel; sql: string[] } {
  const sql: string[] = [];
  const proxy = new Proxy(db, {
    get(target, prop) {
      if (prop === "prepare")
        return (text: string) => {
          sql.push(text);
          return target.prepare(text);
        };
      const value = Reflect.get(target, prop, target) as unknown;
      return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { threads: new ThreadsReadModel(proxy), sql };
}

/** SQLite's plan of `sql` (its parameters bound to NULL): one line per step. */
function plan(db: Database.Database, sql: string): string[] {
  const params = Array.from({ length: sql.split("?").length - 1 }, () => null);
  return (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params) as { detail: string }[]).map((r) => r.detail);
}

t.test("a metadata search walks the index in created_at order and counts from the index alone", async (t) => {
  const srv = await startTestServer();
  t.teardown(() => srv.close());
  const { client } = srv;
  const tag = `plan-${Date.now()}`;
  const made: string[] = [];
  for (let i = 0; i < 24; i++) made.push((await client.threads.create({ metadata: { tag, user: `u${i % 3}`, i } })).thread_id);
  await client.threads.delete(made[4]); // u1: deleted threads leave the index
  await client.threads.update(made[7], { metadata: { user: "u2" } }); // u1 → u2: the index rows are replaced
  await client.runs.wait(made[1], "agent", { input: { messages: [{ role: "user", content: "hello" }] } }); // u1 with values
  const db = srv.server.readModels.runner.db;
  const { threads, sql } = recorded(db);

  t.equal(
    db
      .prepare("SELECT count(*) FROM threads_metadata m JOIN threads th ON th.thread_id = m.id WHERE m.created_at <> th.created_at OR th.deleted <> 0")
      .pluck()
      .get(),
    0,
    "index rows carry their live thread's created_at",
  );

  const reference = (user: string, order: "ASC" | "DESC") =>
    db
      .prepare(
        `SELECT thread_id FROM threads WHERE deleted = 0 AND json_extract(metadata, '$.tag') = ? AND json_extract(metadata, '$.user') = ?
         ORDER BY created_at ${order}, thread_id ${order}`,
      )
      .pluck()
      .all(tag, user) as string[];
  for (const user of ["u0", "u1", "u2", "nobody"]) {
    for (const order of ["asc", "desc"] as const) {
      const want = reference(user, order === "asc" ? "ASC" : "DESC");
      for (const [limit, offset] of [
        [10, 0],
        [3, 2],
        [5, 7],
      ]) {
        const got = threads.search({ metadata: { user, tag }, sort_order: order, limit, offset });
        t.same(
          got.page.map((x) => x.thread_id),
          want.slice(offset, offset + limit),
          `${user} ${order} limit ${limit} offset ${offset}`,
        );
        t.equal(got.total, want.length, `${user} total`);
      }
      t.equal(threads.count({ metadata: { user, tag } }), want.length, `${user} count`);
    }
  }
  t.ok(made.length === 24 && reference("u1", "ASC").length === 6, "u1 lost the deleted and the moved thread");

  sql.length = 0;
  threads.search({ metadata: { user: "u1" }, limit: 10, offset: 0 });
  const [page, count] = sql;
  t.equal(sql.length, 2, "a page and a count");
  const pagePlan = plan(db, page);
  t.match(pagePlan[0], /^SEARCH driver USING COVERING INDEX threads_metadata_kv \(key=\? AND value=\?\)/, `driven by the index: ${pagePlan.join("; ")}`);
  t.notOk(
    pagePlan.some((step) => /^SCAN|TEMP B-TREE/.test(step)),
    `no scan, no sort of the matches: ${pagePlan.join("; ")}`,
  );
  const countPlan = plan(db, count);
  t.same(countPlan, ["SEARCH driver USING COVERING INDEX threads_metadata_kv (key=? AND value=?)"], "the count reads the index alone");

  // Two scalar entries: the second is an index lookup too, and the count still needs no thread row.
  sql.length = 0;
  threads.search({ metadata: { user: "u1", tag }, limit: 10, offset: 0 });
  for (const text of sql) {
    const steps = plan(db, text);
    t.notOk(
      steps.some((step) => /^SCAN|TEMP B-TREE FOR ORDER BY/.test(step)),
      `no scan: ${steps.join("; ")}`,
    );
  }
  t.notOk(/\bthreads\b(?!_metadata)/.test(sql[1]), "count of two scalar entries: the index alone");

  // A condition on the thread's row (status, or a nested entry) joins the threads for the count, and the page keeps the index's order.
  for (const filter of [{ status: "idle" as const }, { metadata: { user: "u1", nested: { a: 1 } } }]) {
    sql.length = 0;
    const got = threads.search({ metadata: { user: "u1" }, ...filter, limit: 10, offset: 0 });
    t.match(sql[1], /CROSS JOIN threads/, "the count reads the threads");
    t.notOk(
      plan(db, sql[0]).some((step) => /^SCAN|TEMP B-TREE/.test(step)),
      "page in index order",
    );
    t.equal(got.total, threads.count({ metadata: { user: "u1" }, ...filter }));
  }
  // Another sort order is the threads' own column: still no scan of the table.
  sql.length = 0;
  threads.search({ metadata: { user: "u1" }, sort_by: "updated_at", limit: 10, offset: 0 });
  t.notOk(
    plan(db, sql[0]).some((step) => step.startsWith("SCAN")),
    "sorted by updated_at: no scan",
  );
});
