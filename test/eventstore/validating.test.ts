/**
 * withSchemas checks events against the catalogue on WRITE only: the store boundary. Decision: reads trust the
 * log, since nothing enters it through the server unchecked, and checking again on every read cost a schema
 * parse per event and per reader on the hot path. What a read still refuses is data that cannot be parsed at
 * all (the log was changed around the store): an InvalidEventError naming the stream and revision.
 */
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import t, { type Test } from "tap";
import { z } from "zod";
import { openSqliteStore } from "../../src/eventstore/sqlite.js";
import { AppendTicket, InvalidEventError, type EventStore, type SubscriptionItem } from "../../src/eventstore/types.js";
import { EventLimitError, withSchemas } from "../../src/eventstore/validating.js";
import { InputLimitError, LOG_LIMITS } from "../../src/util/json-limits.js";

const catalogue: Record<string, z.ZodType> = {
  Created: z.object({ name: z.string() }),
  Renamed: z.object({ name: z.string().min(1) }),
};

async function stores(t: Test): Promise<{ raw: EventStore; checked: EventStore; file: string }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "eventstore-validating-"));
  const file = path.join(dir, "events.sqlite");
  const raw = await openSqliteStore({ path: file });
  t.teardown(async () => {
    await raw.close();
    await rm(dir, { recursive: true, force: true });
  });
  return { raw, checked: withSchemas(raw, (type) => catalogue[type]), file };
}

/** Asserts an InvalidEventError naming the stream and revision. */
async function expectInvalid(
  t: Test,
  attempt: () => Promise<unknown>,
  wanted: { stream: string; revision: bigint | undefined; eventType: string; reason: RegExp },
  what: string,
): Promise<void> {
  try {
    await attempt();
    t.fail(`${what}: expected an InvalidEventError`);
  } catch (error) {
    t.ok(error instanceof InvalidEventError, `${what}: InvalidEventError`);
    const e = error as InvalidEventError;
    const { reason, ...where } = wanted;
    t.same({ stream: e.stream, revision: e.revision, eventType: e.eventType }, where, `${what}: where`);
    t.match(e.reason, reason, `${what}: why (${e.message})`);
  }
}

async function drain(items: AsyncIterable<SubscriptionItem>, upTo: number): Promise<SubscriptionItem[]> {
  const seen: SubscriptionItem[] = [];
  for await (const item of items) {
    seen.push(item);
    if (seen.length === upTo) break;
  }
  return seen;
}

t.test("valid events pass both ways", async (t) => {
  const { checked } = await stores(t);
  await checked.append("user-1", [
    { type: "Created", data: { name: "Ada" } },
    { type: "Renamed", data: { name: "Ada L." } },
  ]);
  t.same(
    (await checked.readStream("user-1")).map((e) => e.data),
    [{ name: "Ada" }, { name: "Ada L." }],
    "read back",
  );
  t.equal((await checked.readAll()).length, 2, "readAll");
});

t.test("append refuses unknown types and bad payloads, and writes nothing", async (t) => {
  const { raw, checked } = await stores(t);
  await expectInvalid(
    t,
    async () => checked.append("user-1", [{ type: "Deleted", data: {} }]),
    { stream: "user-1", revision: undefined, eventType: "Deleted", reason: /unknown event type/ },
    "unknown type",
  );
  await expectInvalid(
    t,
    async () =>
      checked.append("user-1", [
        { type: "Created", data: { name: "ok" } },
        { type: "Renamed", data: { name: "" } },
      ]),
    { stream: "user-1", revision: undefined, eventType: "Renamed", reason: /^name: / },
    "bad payload in the second event",
  );
  await expectInvalid(
    t,
    async () => checked.append("user-1", [{ type: "Created", data: { name: 42 } }]),
    { stream: "user-1", revision: undefined, eventType: "Created", reason: /name/ },
    "wrong field type",
  );
  t.same(await raw.readAll(), [], "nothing was written");
});

t.test("reads trust the log: an event written around the schema check is read as written", async (t) => {
  const { raw, checked } = await stores(t);
  await raw.append("user-1", [
    { type: "Created", data: { name: "Ada" } },
    { type: "Renamed", data: { name: "" } }, // written around the schema check
    { type: "Archived", data: {} }, // not in the catalogue
  ]);
  const expected = [{ name: "Ada" }, { name: "" }, {}];
  t.same(
    (await checked.readStream("user-1")).map((e) => e.data),
    expected,
    "readStream",
  );
  t.same(
    (await checked.readAll()).map((e) => e.data),
    expected,
    "readAll",
  );
  const items = await drain(checked.subscribeToAll(), 4);
  t.same(
    items.map((i) => (i.kind === "event" ? i.event.data : i.kind)),
    [...expected, "caughtUp"],
    "subscribeToAll",
  );
});

t.test("data that is not JSON is an error naming its stream and revision", async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), "eventstore-validating-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const file = path.join(dir, "events.sqlite");
  const first = await openSqliteStore({ path: file });
  await first.append("user-1", [
    { type: "Created", data: { name: "Ada" } },
    { type: "Renamed", data: { name: "Ada L." } },
  ]);
  await first.close();
  // Broken around the store, as a bad restore or a manual edit would.
  const db = new Database(file);
  db.prepare("UPDATE events SET data = '{\"name\": ' WHERE stream_id = 'user-1' AND revision = 1").run();
  db.close();

  const raw = await openSqliteStore({ path: file });
  t.teardown(() => raw.close());
  const checked = withSchemas(raw, (type) => catalogue[type]);
  const where = { stream: "user-1", revision: 1n, eventType: "Renamed", reason: /^data is not valid JSON/ };
  await expectInvalid(t, () => checked.readStream("user-1"), where, "readStream");
  await expectInvalid(t, () => checked.readAll(), where, "readAll");
  await expectInvalid(t, () => drain(checked.subscribeToAll(), 10), where, "subscribeToAll");

  const sub = checked.subscribeToStream("user-1");
  const it = sub[Symbol.asyncIterator]();
  const before = (await it.next()).value;
  t.same(before?.kind === "event" && before.event.data, { name: "Ada" }, "events before the bad one are delivered");
  await expectInvalid(t, () => it.next(), where, "then the subscription fails at the bad event");
  await sub.close();
});

t.test("unchecked types skip their schema but must be in the catalogue; the other events of the append are still checked", async (t) => {
  const { raw } = await stores(t);
  const checked = withSchemas(raw, (type) => catalogue[type], new Set(["Renamed"]));
  await checked.append("user-1", [
    { type: "Created", data: { name: "Ada" } },
    { type: "Renamed", data: { name: "" } },
  ]);
  t.same(
    (await raw.readStream("user-1")).map((e) => e.data),
    [{ name: "Ada" }, { name: "" }],
    "the unchecked event is written as given",
  );
  await expectInvalid(
    t,
    async () =>
      checked.append("user-2", [
        { type: "Renamed", data: { name: "x" } },
        { type: "Created", data: { name: 1 } },
      ]),
    { stream: "user-2", revision: undefined, eventType: "Created", reason: /name/ },
    "a checked type beside an unchecked one",
  );
  const unknown = withSchemas(raw, (type) => catalogue[type], new Set(["Archived"]));
  await expectInvalid(
    t,
    async () => unknown.append("user-3", [{ type: "Archived", data: {} }]),
    { stream: "user-3", revision: undefined, eventType: "Archived", reason: /unknown event type/ },
    "an unchecked type not in the catalogue",
  );
  t.same(
    (await raw.readAll()).map((e) => e.streamId),
    ["user-1", "user-1"],
    "nothing else was written",
  );
});

t.test("EVENT_SCHEMA_CHECKS: lifecycle by default (the step events of runs unchecked), all on request, nothing else accepted", async (t) => {
  const { loadConfig, ConfigError } = await import("../../src/config.js");
  const { STEP_EVENT_TYPES, schemaForEventType } = await import("../../src/domain/events.js");
  t.equal(loadConfig({}).eventSchemaChecks, "lifecycle");
  t.equal(loadConfig({ EVENT_SCHEMA_CHECKS: "all" }).eventSchemaChecks, "all");
  t.throws(() => loadConfig({ EVENT_SCHEMA_CHECKS: "none" }), ConfigError);
  t.same([...STEP_EVENT_TYPES].sort(), ["CheckpointSaved", "PendingWritesSaved", "RunOutput"]);
  for (const type of STEP_EVENT_TYPES) t.ok(schemaForEventType(type), `${type} is in the catalogue`);
});

t.test("an append the schema check refuses fails its ticket: an append that depends on it is refused too, and neither is written", async (t) => {
  const { checked } = await stores(t);
  const bad = new AppendTicket();
  const refusal = checked.append("checkpoints-1", [{ type: "Renamed", data: { name: "" } }], "any", { ticket: bad });
  const dependent = checked.append("end-1", [{ type: "Created", data: { name: "end" } }], "any", { ticket: new AppendTicket(), after: [bad] });
  await t.rejects(refusal, InvalidEventError);
  t.equal(bad.state, "failed", "the refused append's ticket failed");
  await t.rejects(dependent, InvalidEventError, "the dependent append fails with the refusal");
  t.same(await checked.readStream("checkpoints-1"), [], "nothing of the refused append");
  t.same(await checked.readStream("end-1"), [], "nothing of the dependent append");
});

t.test("data nested beyond the log's limits is refused for every type, unchecked ones included, and nothing is written", async (t) => {
  const { raw } = await stores(t);
  const checked = withSchemas(raw, (type) => (type === "Step" ? z.unknown() : catalogue[type]), new Set(["Step"]));
  let deep: unknown = "leaf";
  for (let i = 0; i < LOG_LIMITS.maxDepth; i++) deep = [deep];
  await checked.append("user-1", [{ type: "Step", data: { ok: true } }]);
  for (const type of ["Step", "Created"]) {
    try {
      await checked.append("user-2", [{ type, data: { name: "x", values: deep } }]);
      t.fail(`${type}: expected an EventLimitError`);
    } catch (error) {
      t.ok(error instanceof EventLimitError, `${type}: EventLimitError`);
      t.ok(error instanceof InputLimitError, `${type}: answered as bad input at the edges`);
      t.match(
        (error as Error).message,
        new RegExp(`^Event ${type} for "user-2" refused: data\\.values\\[0\\].*nested deeper than ${LOG_LIMITS.maxDepth} levels`),
      );
    }
  }
  let atLimit: unknown = "leaf";
  for (let i = 0; i < LOG_LIMITS.maxDepth - 2; i++) atLimit = [atLimit];
  await checked.append("user-3", [{ type: "Step", data: { values: atLimit } }]);
  t.same(
    (await raw.readAll()).map((e) => e.streamId),
    ["user-1", "user-3"],
    "only the events within the limit were written",
  );
});
