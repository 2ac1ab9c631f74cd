import t from "tap";
import fc from "fast-check";
import { JsonPlusSerializer } from "@langchain/langgraph-checkpoint";
import { CheckpointCodec, plainJsonCopy } from "../src/runtime/checkpoint-codec.js";

const serde = new JsonPlusSerializer();
/** What the serializer writes for a value, parsed back: the JSON form the log keeps. */
async function serdeForm(value: unknown): Promise<unknown> {
  const [, bytes] = await serde.dumpsTyped(value);
  return JSON.parse(Buffer.from(bytes).toString("utf8"));
}

t.test("plainJsonCopy: plain JSON is copied as the serializer would write it", async (t) => {
  await fc.assert(
    fc.asyncProperty(fc.jsonValue(), async (value) => {
      const copy = plainJsonCopy(value, 0);
      t.same(copy, await serdeForm(value));
      if (value !== null && typeof value === "object") t.not(copy, value, "a copy, not the value");
    }),
    { numRuns: 200 },
  );
  const withProtoKey = JSON.parse('{"__proto__": {"x": 1}, "a": 2}') as unknown;
  t.same(Object.keys(plainJsonCopy(withProtoKey, 0) as object), ["__proto__", "a"], "an own __proto__ key stays a key");
  t.same(plainJsonCopy(withProtoKey, 0), await serdeForm(withProtoKey));
});

t.test("plainJsonCopy: anything the serializer encodes its own way is left to it", async (t) => {
  class Thing {
    x = 1;
  }
  let deep: unknown = "leaf";
  for (let i = 0; i < 40; i++) deep = { deep };
  for (const [what, value] of [
    ["undefined member", { a: undefined }],
    ["hole in an array", [1, , 3]],
    ["NaN", { n: Number.NaN }],
    ["Infinity", [Infinity]],
    ["a Date", { at: new Date(0) }],
    ["a Map", { m: new Map([["k", 1]]) }],
    ["a Set", new Set([1])],
    ["a class instance", { t: new Thing() }],
    ["a bigint", { b: 1n }],
    ["very deep nesting", deep],
  ] as const) {
    t.equal(plainJsonCopy(value, 0), undefined, what);
  }
});

t.test("the codec's checkpoint event has the serializer's JSON form, plain or not", async (t) => {
  const codec = new CheckpointCodec(serde, true);
  const checkpoint = { v: 4, id: "1f0-a", ts: "2026-01-01T00:00:00.000Z", channel_values: { messages: ["hi"] }, channel_versions: { messages: 2 }, versions_seen: { agent: { messages: 1 } } };
  for (const metadata of [{ source: "loop", step: 1, parents: {} }, { source: "loop", step: 1, parents: {}, at: new Date(0), gone: undefined }]) {
    const event = await codec.checkpointSaved({ configurable: { thread_id: "t", user: "u", __internal: 1 }, metadata: { run_id: "r" } }, checkpoint as never, metadata as never, { messages: 2 });
    const { channel_values: _values, ...stored } = checkpoint;
    t.same(event.checkpoint, await serdeForm(stored), "the checkpoint, without its values");
    t.same(event.metadata, await serdeForm({ user: "u", run_id: "r", ...metadata }), "the metadata, with the run's configurable values");
  }
});
