import t from "tap";
import { frozenFlatData, jsonTextOf } from "../../src/eventstore/json-text.js";
import { sizeOfEvent } from "../../src/eventstore/chunked-append.js";

t.test("flat frozen data is serialised once, and cannot change under its text", async (t) => {
  const data = frozenFlatData({ text: 'a "quoted" \u2028 piece', index: 1, done: false, none: null });
  t.ok(Object.isFrozen(data));
  const first = jsonTextOf(data);
  t.equal(first, JSON.stringify(data));
  t.equal(jsonTextOf(data), first, "the same text again");
  let calls = 0;
  const spy = JSON.stringify;
  JSON.stringify = ((...args: Parameters<typeof JSON.stringify>) => {
    calls++;
    return spy(...args);
  }) as typeof JSON.stringify;
  try {
    jsonTextOf(data);
    sizeOfEvent({ type: "LargeJsonChunk", data });
    t.equal(calls, 0, "measuring and serialising it again reuses the text");
    jsonTextOf({ text: "other" });
    t.equal(calls, 1, "data that is not frozen flat data is serialised each time");
  } finally {
    JSON.stringify = spy;
  }
  t.throws(() => {
    "use strict";
    (data as { index: number }).index = 2;
  }, TypeError);
  t.equal(jsonTextOf(data), first);
});

t.test("only primitives may be kept that way", async (t) => {
  t.throws(() => frozenFlatData({ nested: { a: 1 } } as never), /primitives/);
  const mutable = { a: 1 };
  t.equal(jsonTextOf(mutable), '{"a":1}');
  mutable.a = 2;
  t.equal(jsonTextOf(mutable), '{"a":2}', "ordinary data is never served a stale text");
});
