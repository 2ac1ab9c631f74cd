import t from "tap";
import { splitOutputText } from "../../src/runtime/run-tail.js";
import { ownRecordedEvent, recordedEvent } from "../../src/eventstore/sqlite-rows.js";
import { dataTextOf } from "../../src/eventstore/data-text.js";
import { InvalidEventError } from "../../src/eventstore/types.js";

/** A RunOutput's stored text taken apart without parsing, and the SQLite store's events that keep their data's text. */

t.test("splitOutputText gives the name and the text JSON.stringify makes of the parsed data", async (t) => {
  const values = [
    { messages: [{ content: 'q"uote \\ \n \u2028 😀 \u0000', id: "ai-1" }] },
    [
      { type: "AIMessageChunk", content: "tok" },
      { langgraph_node: "agent", tags: [] },
    ],
    "a string",
    42,
    -0,
    1e21,
    null,
    true,
    { "": { '","data":': "key like the separator" } },
    { nested: { __large_json_: 1 } },
  ];
  for (const name of ["values", "messages", "custom", "values|child:1|grandchild:2", "metadata"]) {
    for (const data of values) {
      const text = JSON.stringify({ event: name, data });
      const split = splitOutputText(text);
      t.ok(split, `${name}: ${text.slice(0, 60)}`);
      t.equal(split?.event, name);
      t.equal(split?.dataText, JSON.stringify((JSON.parse(text) as { data: unknown }).data));
    }
  }
});

t.test("splitOutputText leaves to the parser what it cannot take apart surely", async (t) => {
  t.equal(splitOutputText(JSON.stringify({ data: 1, event: "values" })), undefined, "keys in another order");
  t.equal(splitOutputText(JSON.stringify({ event: "values" })), undefined, "no data");
  t.equal(splitOutputText(JSON.stringify({ event: 'a"b', data: 1 })), undefined, "a name with a quote");
  t.equal(splitOutputText(JSON.stringify({ event: 'x","data":', data: 1 })), undefined, "a name holding the separator");
  t.equal(splitOutputText(JSON.stringify({ event: "a\\b", data: 1 })), undefined, "a name with a backslash");
  t.equal(splitOutputText(JSON.stringify({ event: "values", data: { __large_json__: { ref: 1 } } })), undefined, "a large chunk's reference");
  t.equal(splitOutputText(JSON.stringify({ event: "values", data: { deep: { __large_json__: 1 } } })), undefined, "the key anywhere: parsed, to be safe");
  t.equal(splitOutputText("not json"), undefined);
  t.equal(splitOutputText(""), undefined);
});

t.test("an own event parses its data and metadata on first use, frozen, and reads and copies as a table event does", async (t) => {
  const data = JSON.stringify({ event: "values", data: { messages: [{ content: "hi" }] } });
  const metadata = JSON.stringify({ $correlationId: "c" });
  const stored = { position: 7n, streamId: "run-x", revision: 2n, id: "id-1", type: "RunOutput", data, metadata, created: 1_700_000_000_000 };
  const own = ownRecordedEvent(stored);
  const table = recordedEvent(stored);
  t.same(Object.keys(own), Object.keys(table), "the same keys, in the same order");
  t.same({ ...own }, { ...table }, "the same content");
  t.equal(dataTextOf(own), data, "its data's text");
  t.equal(dataTextOf(table), undefined, "a table event keeps none");
  t.equal(dataTextOf({ ...own }), undefined, "nor does a copy, which may change its data");
  t.equal(own.data, own.data, "parsed once");
  t.ok(Object.isFrozen(own) && Object.isFrozen(own.data) && Object.isFrozen((own.data as { data: object }).data), "frozen through");
  t.ok(Object.isFrozen(own.metadata));
  t.same(
    ownRecordedEvent({ position: 1n, streamId: "s", revision: 0n, id: "i", type: "T", data: "{}", metadata: null, created: 0 }).metadata,
    {},
    "no metadata: empty",
  );
});

t.test("an own event whose text does not parse names its stream and revision when read", async (t) => {
  const broken = ownRecordedEvent({
    position: 3n,
    streamId: "run-y",
    revision: 5n,
    id: "id",
    type: "RunOutput",
    data: "{not json",
    metadata: null,
    created: 0,
  });
  t.equal(broken.type, "RunOutput", "its envelope reads without its data");
  t.throws(() => broken.data, InvalidEventError);
});
