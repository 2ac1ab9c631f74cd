import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import t from "tap";
import { InvalidNamespaceError } from "@langchain/langgraph-checkpoint";
import { openReadModels } from "../../src/read-models/all.js";
import { StoreService } from "../../src/app/store.js";
import { EventSourcedStore } from "../../src/app/graph-store.js";
import { storeItemStream } from "../../src/domain/store.js";
import { FakeClock } from "../support/fake-clock.js";
import { logWithReadModels } from "../support/log-with-read-models.js";

/**
 * The graphs' BaseStore on a real SQLite log and read-model database: every operation kind of
 * `batch` (also listNamespaces, which LangGraph's AsyncBatchedStore does not pass on), the
 * attribution of writes, namespace errors, and a rebuild of the read model that equals it.
 */

t.test("EventSourcedStore", async (t) => {
  const { store: log, readModels: models } = await logWithReadModels(t, "store-graph-");
  const clock = new FakeClock();
  const service = new StoreService({ store: log, readModels: models, clock });
  const store = new EventSourcedStore(service, { run_id: "run-1", thread_id: "thread-1" });

  await store.put(["users", "u1", "prefs"], "theme", { color: "dark", size: 2 });
  await store.put(["users", "u2", "prefs"], "theme", { color: "light", size: 1 });
  await store.put(["users", "u2"], "name", { value: "Bo" });
  const item = await store.get(["users", "u1", "prefs"], "theme");
  t.same(item?.value, { color: "dark", size: 2 });
  t.ok(item?.createdAt instanceof Date);
  t.same(
    (await store.search(["users"], { filter: { size: { $gte: 2 } } })).map((i) => i.key),
    ["theme"],
  );
  t.same(await store.listNamespaces({ prefix: ["users"], maxDepth: 2 }), [
    ["users", "u1"],
    ["users", "u2"],
  ]);
  t.same(await store.listNamespaces({ suffix: ["prefs"] }), [
    ["users", "u1", "prefs"],
    ["users", "u2", "prefs"],
  ]);

  const [got, , listed] = await store.batch([
    { namespace: ["users", "u2"], key: "name", value: null },
    { namespace: ["users", "u2"], key: "name" },
    { matchConditions: [{ matchType: "prefix", path: ["users", "*", "prefs"] }], limit: 10, offset: 0 },
  ] as const);
  t.equal(got, undefined, "a put result is void");
  t.same(listed, [
    ["users", "u1", "prefs"],
    ["users", "u2", "prefs"],
  ]);
  t.equal(await store.get(["users", "u2"], "name"), null, "deleted within the batch, in order");

  const events = await log.readStream(storeItemStream(["users", "u2"], "name"));
  t.same(
    events.map((e) => [e.type, (e.data as { run_id?: string }).run_id]),
    [
      ["StoreItemPut", "run-1"],
      ["StoreItemDeleted", "run-1"],
    ],
    "writes are attributed to the run",
  );

  await t.rejects(store.put(["a.b"], "k", {}), InvalidNamespaceError);
  await t.rejects(store.batch([{ namespace: [], key: "k", value: { v: 1 } }]), /Namespace is required/);

  t.test("a rebuild from the log equals the live tables", async (t) => {
    await store.put(["ttl"], "x", { v: 1 });
    const rebuiltDir = await mkdtemp(path.join(os.tmpdir(), "store-graph-rebuild-"));
    const rebuilt = openReadModels(rebuiltDir);
    await rebuilt.runner.start(log);
    t.teardown(async () => {
      await rebuilt.runner.close();
      await rm(rebuiltDir, { recursive: true, force: true });
    });
    for (const table of ["store_items", "store_vectors", "store_namespaces"]) {
      const q = `SELECT * FROM ${table} ORDER BY 1, 2`;
      t.same(rebuilt.runner.db.prepare(q).all(), models.runner.db.prepare(q).all(), table);
    }
  });
});
