import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import t, { type Test } from "tap";
import { z } from "zod";
import { openSqliteStore } from "../src/eventstore/sqlite.js";
import { InvalidEventError, type EventStore, type SubscriptionItem } from "../src/eventstore/types.js";
import { withSchemas } from "../src/eventstore/validating.js";

const catalogue: Record<string, z.ZodType> = {
  Created: z.object({ name: z.string() }),
  Renamed: z.object({ name: z.string().min(1) }),
};

async function stores(t: Test): Promise<{ raw: EventStore; checked: EventStore }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "eventstore-validating-"));
  const raw = await openSqliteStore({ path: path.join(dir, "events.sqlite") });
  t.teardown(async () => {
    await raw.close();
    await rm(dir, { recursive: true, force: true });
  });
  return { raw, checked: withSchemas(raw, (type) => catalogue[type]) };
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
  await checked.append("user-1", [{ type: "Created", data: { name: "Ada" } }, { type: "Renamed", data: { name: "Ada L." } }]);
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
    async () => checked.append("user-1", [{ type: "Created", data: { name: "ok" } }, { type: "Renamed", data: { name: "" } }]),
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

t.test("a bad event already in the log is an error naming its stream and revision", async (t) => {
  const { raw, checked } = await stores(t);
  await raw.append("user-1", [
    { type: "Created", data: { name: "Ada" } },
    { type: "Renamed", data: { name: "" } }, // written around the schema check
  ]);
  const where = { stream: "user-1", revision: 1n, eventType: "Renamed", reason: /name/ };
  await expectInvalid(t, () => checked.readStream("user-1"), where, "readStream");
  await expectInvalid(t, () => checked.readAll(), where, "readAll");
  await expectInvalid(t, () => drain(checked.subscribeToStream("user-1"), 10), where, "subscribeToStream");
  await expectInvalid(t, () => drain(checked.subscribeToAll(), 10), where, "subscribeToAll");

  await raw.append("user-2", [{ type: "Archived", data: {} }]);
  await expectInvalid(
    t,
    () => checked.readStream("user-2"),
    { stream: "user-2", revision: 0n, eventType: "Archived", reason: /unknown event type/ },
    "unknown type in the log",
  );

  const sub = checked.subscribeToStream("user-1");
  const it = sub[Symbol.asyncIterator]();
  t.same((await it.next()).value, { kind: "event", event: (await raw.readStream("user-1"))[0] }, "events before the bad one are delivered");
  await expectInvalid(t, () => it.next(), where, "then the subscription fails at the bad event");
  await sub.close();
});
