// The split of big logical writes into appends under EventStoreDB's limit (pure parts, then a SQLite file).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import t from "tap";
import { APPEND_BUDGET, appendInBatches, getLargeJson, operationEventId, planBatches, putLargeJson, sizeOfEvent } from "../../src/eventstore/chunked-append.js";
import { openSqliteStore } from "../../src/eventstore/sqlite.js";
import { AppendTooLargeError, MAX_APPEND_SIZE, type EventData } from "../../src/eventstore/types.js";

const event = (bytes: number, type = "E"): EventData => ({ type, data: "x".repeat(bytes - 2 - 2 * type.length) });

t.test("planBatches: in order, each batch within the budget, an event over it refused", async (t) => {
  t.equal(sizeOfEvent(event(1000)), 1000, "sized like the stores size it");
  t.ok(APPEND_BUDGET < MAX_APPEND_SIZE);
  const events = Array.from({ length: 25 }, (_, i) => event(100_000 + i));
  const batches = planBatches("s", events, 300_000);
  t.same(batches.flat(), events, "every event once, in order");
  t.ok(
    batches.every((b) => b.reduce((n, e) => n + sizeOfEvent(e), 0) <= 300_000),
    "each batch within the budget",
  );
  t.equal(batches.length, 13, "two per batch (three would not fit)");
  t.throws(() => planBatches("s", [event(10), event(300_001)], 300_000), AppendTooLargeError);
  t.same(planBatches("s", []), []);
});

t.test("operation event ids are stable UUIDs", async (t) => {
  t.equal(operationEventId("op", 3), operationEventId("op", 3));
  t.not(operationEventId("op", 3), operationEventId("op", 4));
  t.not(operationEventId("op", 3), operationEventId("op2", 3));
  t.match(operationEventId("op", 0), /^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
});

t.test("appendInBatches on SQLite: over the limit in several appends; running it again duplicates nothing", async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), "chunked-append-"));
  const store = await openSqliteStore({ path: path.join(dir, "events.sqlite") });
  t.teardown(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const events = Array.from({ length: 12 }, (_, i) => event(300_000 + i));
  const seen: number[] = [];
  const last = await appendInBatches(store, "big-1", events, { operationId: "op-1", onAppended: (batch) => void seen.push(batch.length) });
  t.equal(last, 11n);
  t.ok(seen.length >= 4, `${seen.length} appends`);
  t.same(
    seen.reduce((a, b) => a + b, 0),
    12,
  );
  t.equal(await appendInBatches(store, "big-1", events, { operationId: "op-1" }), 11n, "a retry acknowledges the same revisions");
  t.equal((await store.readStream("big-1")).length, 12, "and writes nothing");
  await t.rejects(store.append("big-1", [event(MAX_APPEND_SIZE + 1)]), AppendTooLargeError, "one append over the limit is refused");

  const ref = await putLargeJson(store, "blob-", "x", { a: "é".repeat(2_000_000) });
  t.same(await getLargeJson(store, ref), { a: "é".repeat(2_000_000) }, "a 4 MB (UTF-8) value round-trips");
  await t.rejects(getLargeJson(store, { ...ref, sha256: "0".repeat(64) }), { name: "LargeJsonMissingError" });
});
