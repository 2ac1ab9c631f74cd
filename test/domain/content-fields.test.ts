import { readFile } from "node:fs/promises";
import path from "node:path";
import { pathToFileURL } from "node:url";
import t from "tap";
import type { ZodType } from "zod";
import {
  CLEAR,
  EVENT_CONTENT,
  clearPartOf,
  contentRuleOf,
  joinContent,
  splitContent,
  streamsSharingThreadKey,
  type ContentRule,
} from "../../src/domain/content-fields.js";
import { schemaForEventType } from "../../src/domain/events.js";

const eventsModule = path.resolve(import.meta.dirname, "../../src/domain/events.ts");

/**
 * The catalogue's types as events.ts builds it: every object spread into `catalogue`, found in the
 * module it is imported from. Read from the source, so a new group of schemas counts too.
 */
async function catalogueTypes(): Promise<string[]> {
  const source = await readFile(eventsModule, "utf8");
  const body = /const catalogue = \{([\s\S]*?)\}\s*satisfies/.exec(source)?.[1];
  if (!body) throw new Error("events.ts: the catalogue object was not found");
  const spreads = [...body.matchAll(/\.\.\.(\w+)/g)].map((m) => m[1]);
  const imports = new Map<string, string>();
  for (const m of source.matchAll(/import \{([^}]*)\} from "([^"]+)"/g)) {
    for (const name of m[1].split(",").map((n) => n.trim().replace(/^type /, ""))) imports.set(name, m[2]);
  }
  const types = new Set<string>();
  for (const name of spreads) {
    const from = imports.get(name);
    if (!from) throw new Error(`events.ts: ${name} is spread into the catalogue but not imported by name`);
    const url = pathToFileURL(path.resolve(path.dirname(eventsModule), from.replace(/\.js$/, ".ts"))).href;
    const group = ((await import(url)) as Record<string, Record<string, ZodType>>)[name];
    for (const type of Object.keys(group)) types.add(type);
  }
  return [...types].sort();
}

t.test("every event type of the catalogue is decided: content-bearing or clear", async (t) => {
  const types = await catalogueTypes();
  t.ok(types.length > 40, `the catalogue was read (${types.length} types)`);
  for (const type of types) t.ok(schemaForEventType(type), `${type} is in the catalogue`);
  const decided = Object.keys(EVENT_CONTENT).sort();
  t.same(
    types.filter((type) => !decided.includes(type)),
    [],
    "no catalogue type without a decision in src/domain/content-fields.ts (is it content, or clear?)",
  );
  t.same(
    decided.filter((type) => !types.includes(type)),
    [],
    "no decision for a type the catalogue no longer has",
  );
});

t.test("each content path starts at a field of the type's schema", async (t) => {
  for (const [type, rule] of Object.entries(EVENT_CONTENT) as [string, ContentRule | typeof CLEAR][]) {
    if (rule === CLEAR) continue;
    const shape = (schemaForEventType(type) as unknown as { shape?: Record<string, unknown> }).shape;
    if (!shape) continue;
    for (const field of [...rule.content, ...(rule.metadata ?? [])]) t.ok(Object.hasOwn(shape, field[0]), `${type}: ${field.join(".")}`);
  }
});

t.test("the fields every fold orders or filters by stay clear", async (t) => {
  const clearTypes = [
    "ThreadPurged",
    "ThreadDeleted",
    "RunClaimed",
    "RunCancelRequested",
    "RunDeleted",
    "CheckpointsDiscarded",
    "CheckpointsSnapshot",
    "StoreItemDeleted",
    "CronFired",
  ];
  for (const type of clearTypes) t.equal(contentRuleOf(type), undefined, `${type}: stored unchanged`);
  const run = { run_id: "r", thread_id: "t", status: "pending", metadata: { owner: "alice", email: "a@b" }, kwargs: { input: 1 } };
  const split = splitContent("RunEnqueued", { run, thread_metadata: { owner: "alice", email: "a@b" } }, ["email"]);
  t.same(split?.clear, { run: { run_id: "r", thread_id: "t", status: "pending", metadata: { owner: "alice" } }, thread_metadata: { owner: "alice" } });
  t.same(
    clearPartOf("RunEnqueued", { run, thread_metadata: { owner: "alice", email: "a@b" } }, ["email"]),
    split?.clear,
    "the clear part stored beside the sealed whole",
  );
  t.same(run.metadata, { owner: "alice", email: "a@b" }, "the data given is not changed");
  t.equal(clearPartOf("ThreadUpdated", { metadata: { kept: true }, updated_at: "x" }, ["email"]), undefined, "nothing to seal: stored as it is");
  t.equal(clearPartOf("RunOutput", { event: "metadata", data: { run_id: "r" } }, []), undefined, "a server-made chunk stays clear");
  const ended = splitContent("RunEnded", { status: "success", values: { v: 1 }, ended_at: "x" }, []);
  t.same(ended?.clear, { status: "success", ended_at: "x" });
  const put = splitContent("StoreItemPut", { namespace: ["a"], key: "k", value: { v: 1 }, at: "x", ttl_minutes: null, expires_at: null }, []);
  t.same(put?.clear, { namespace: ["a"], key: "k", at: "x", ttl_minutes: null, expires_at: null });
});

t.test("split and join give the data back; nothing to seal leaves the event as it is", async (t) => {
  const data = Object.freeze({ thread_id: "t", metadata: Object.freeze({ "a.b": 1, email: "x", kept: true }), created_at: "now", values: { m: [1, 2] } });
  const split = splitContent("ThreadCreated", data, ["email", "a.b", "absent"]);
  t.ok(split);
  t.same(split!.clear, { thread_id: "t", metadata: { kept: true }, created_at: "now" });
  t.same(joinContent(split!.clear, JSON.parse(JSON.stringify(split!.content))), data);
  t.equal(splitContent("ThreadUpdated", { metadata: { kept: true }, updated_at: "x" }, ["email"]), undefined, "no named key: nothing to seal");
  t.equal(splitContent("ThreadPurged", { thread_id: "t" }, []), undefined);
  t.equal(splitContent("NotAType", { data: 1 }, []), undefined);
  t.equal(splitContent("RunOutput", "not an object", []), undefined);
});

t.test("the clear part keeps the data's other fields in order, an own __proto__ field among them", async (t) => {
  const data = JSON.parse('{"__proto__":{"x":1},"thread_id":"t","metadata":{"__proto__":2,"email":"x","kept":true},"values":{"m":1},"created_at":"now"}');
  const clear = clearPartOf("ThreadCreated", data, ["email"])!;
  t.equal(
    JSON.stringify(clear),
    '{"__proto__":{"x":1},"thread_id":"t","metadata":{"__proto__":2,"kept":true},"created_at":"now"}',
    "the same fields as the data, in its order, without its content",
  );
  t.equal(Object.getPrototypeOf(clear), Object.prototype, "a field named __proto__ did not become the prototype");
  t.equal(Object.getPrototypeOf(clear.metadata), Object.prototype);
  t.equal(data.metadata.email, "x", "the data given is not changed");
});

t.test("a thread's key is shared by its checkpoints and by the runs it enqueues, and by no other stream", async (t) => {
  t.same(streamsSharingThreadKey("thread-t1", "ThreadCreated", { thread_id: "t1" }), ["checkpoints-t1"]);
  t.same(streamsSharingThreadKey("thread-t1", "RunEnqueued", { run: { run_id: "r1" }, thread_metadata: {} }), ["checkpoints-t1", "run-r1"]);
  t.same(streamsSharingThreadKey("thread-t1", "RunEnqueued", { run: {} }), ["checkpoints-t1"], "no run id: no run stream");
  t.same(streamsSharingThreadKey("run-r1", "RunOutput", { event: "values", data: {} }), []);
  t.same(streamsSharingThreadKey("checkpoints-t1", "CheckpointSaved", {}), []);
  t.same(streamsSharingThreadKey("store-ns", "StoreItemPut", {}), [], "a store item keeps a key of its own");
});

t.test("a run's metadata chunk (ids the server made) stays clear; every other chunk is sealed", async (t) => {
  t.equal(splitContent("RunOutput", { event: "metadata", data: { run_id: "r", attempt: 1 } }, []), undefined);
  for (const event of ["values", "messages", "custom", "metadata|sub:1", "updates"]) {
    const split = splitContent("RunOutput", { event, data: { secret: "marker" } }, []);
    t.same(split?.clear, { event }, `${event} is sealed`);
  }
});
