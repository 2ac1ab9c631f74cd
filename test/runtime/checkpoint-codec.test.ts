import t from "tap";
import fc from "fast-check";
import { JsonPlusSerializer } from "@langchain/langgraph-checkpoint";
import { CheckpointCodec, plainJsonCopy } from "../../src/runtime/checkpoint-codec.js";

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
    ["hole in an array", Object.assign(new Array<number>(3), { 0: 1, 2: 3 })],
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
  const checkpoint = {
    v: 4,
    id: "1f0-a",
    ts: "2026-01-01T00:00:00.000Z",
    channel_values: { messages: ["hi"] },
    channel_versions: { messages: 2 },
    versions_seen: { agent: { messages: 1 } },
  };
  for (const metadata of [
    { source: "loop", step: 1, parents: {} },
    { source: "loop", step: 1, parents: {}, at: new Date(0), gone: undefined },
  ]) {
    const event = await codec.checkpointSaved(
      { configurable: { thread_id: "t", user: "u", __internal: 1 }, metadata: { run_id: "r" } },
      checkpoint as never,
      metadata as never,
      { messages: 2 },
    );
    const { channel_values: _values, ...stored } = checkpoint;
    t.same(event.checkpoint, await serdeForm(stored), "the checkpoint, without its values");
    t.same(event.metadata, await serdeForm({ user: "u", run_id: "r", ...metadata }), "the metadata, with the run's configurable values");
  }
});

/** A serializer that writes given bytes under a given type and reads them back as they came. */
const rawSerde = {
  dumpsTyped: async (value: unknown) => value as [string, Uint8Array],
  loadsTyped: async (type: string, data: Uint8Array | string) => [type, typeof data === "string" ? new TextEncoder().encode(data) : data],
};

t.test("channel values are stored as their UTF-8 text when they are UTF-8, else base64, and read back exactly", async (t) => {
  const codec = new CheckpointCodec(serde, false);
  const checkpoint = {
    v: 4,
    id: "1f0-b",
    ts: "2026-01-01T00:00:00.000Z",
    channel_values: { messages: [{ role: "user", content: 'héllo "quoted" 日本 😀' }] },
    channel_versions: { messages: 1 },
    versions_seen: {},
  };
  const event = await codec.checkpointSaved({ configurable: { thread_id: "t" } }, checkpoint as never, { source: "input", step: -1, parents: {} } as never, {
    messages: 1,
  });
  const [type, bytes] = await serde.dumpsTyped(checkpoint.channel_values.messages);
  t.same(event.blobs[0].value, [type, Buffer.from(bytes).toString("utf8"), "utf8"], "the serializer's JSON, readable in the event");
  const tuple = await codec.tuple(
    {
      threadId: "t",
      checkpointNs: "",
      checkpointId: "1f0-b",
      parentId: null,
      checkpoint: event.checkpoint,
      metadata: event.metadata,
      values: [["messages", event.blobs[0].value as never]],
      pendingWrites: [],
    },
    () => 1,
  );
  t.same(tuple.checkpoint.channel_values, checkpoint.channel_values, "read back");

  const raw = new CheckpointCodec(rawSerde as never, false);
  const cases: [string, number[], "utf8" | "base64"][] = [
    ["not UTF-8", [0xff, 0xfe, 0x00, 0x80], "base64"],
    ["a lone continuation byte", [0x61, 0x80], "base64"],
    ["UTF-8 with a byte-order mark", [0xef, 0xbb, 0xbf, 0x68, 0x69], "utf8"],
    ["empty", [], "utf8"],
  ];
  for (const [what, byteList, form] of cases) {
    const value = ["bytes", new Uint8Array(byteList)];
    const saved = await raw.pendingWritesSaved({ configurable: { thread_id: "t", checkpoint_id: "c" } }, [["ch", value]], "task");
    const stored = saved.writes[0].value;
    t.equal(stored.length === 3 ? "utf8" : "base64", form, `${what}: stored as ${form}`);
    const back = await raw.tuple(
      {
        threadId: "t",
        checkpointNs: "",
        checkpointId: "c",
        parentId: null,
        checkpoint: { v: 4, id: "c", ts: "", channel_versions: {}, versions_seen: {} },
        metadata: {},
        values: [],
        pendingWrites: [["task", "ch", stored as never]],
      },
      () => 1,
    );
    t.same([...(back.pendingWrites?.[0][2] as [string, Uint8Array])[1]], byteList, `${what}: the very bytes come back`);
  }
});

t.test("a value stored as base64 (every log before UTF-8 text) still reads", async (t) => {
  const codec = new CheckpointCodec(serde, false);
  const [type, bytes] = await serde.dumpsTyped({ messages: ["old"] });
  const tuple = await codec.tuple(
    {
      threadId: "t",
      checkpointNs: "",
      checkpointId: "c",
      parentId: null,
      checkpoint: { v: 4, id: "c", ts: "", channel_values: {}, channel_versions: { state: 1 }, versions_seen: {} } as never,
      metadata: {},
      values: [["state", [type, Buffer.from(bytes).toString("base64")]]],
      pendingWrites: [],
    },
    () => 1,
  );
  t.same(tuple.checkpoint.channel_values, { state: { messages: ["old"] } });
});
