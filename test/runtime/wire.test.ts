import t from "tap";
import { AIMessage, AIMessageChunk, HumanMessage, SystemMessage, ToolMessage } from "@langchain/core/messages";
import { Command } from "@langchain/langgraph";
import { toWire } from "../../src/runtime/wire.js";

/** The definition toWire must agree with: a JSON round trip whose replacer turns messages into their dicts and bigints into text. */
function oracle(value: unknown): unknown {
  if (value === undefined) return null;
  const text = JSON.stringify(value, function (this: Record<string, unknown>, key: string, v: unknown) {
    const raw = this[key];
    if (raw !== null && typeof raw === "object" && typeof (raw as { toDict?: unknown }).toDict === "function") {
      const { type, data } = (raw as { toDict(): { type: string; data: Record<string, unknown> } }).toDict();
      return { ...data, type };
    }
    return typeof v === "bigint" ? v.toString() : v;
  });
  return text === undefined ? null : JSON.parse(text);
}

class Point {
  constructor(
    readonly x: number,
    readonly y: number,
  ) {}
  get norm() {
    return Math.hypot(this.x, this.y);
  }
}

const messages = [
  new HumanMessage({ content: "hello", id: "h1", name: "ann", additional_kwargs: { n: 1n } }),
  new AIMessage({
    content: [{ type: "text", text: "hi" }],
    id: "a1",
    tool_calls: [{ id: "c1", name: "search", args: { q: "x", nested: new HumanMessage("inside args") } }],
    response_metadata: { at: new Date(0) },
  }),
  new SystemMessage("be brief"),
  new ToolMessage({ content: "42", tool_call_id: "c1" }),
  new AIMessageChunk({ content: "par", id: "a2" }),
];

const sparse: unknown[] = [1, , 3]; // eslint-disable-line no-sparse-arrays
const withProtoKey = JSON.parse('{"__proto__": {"polluted": true}, "ok": 1}') as unknown;

const cases: Record<string, unknown> = {
  undefined: undefined,
  null: null,
  "a message alone": messages[0],
  "a state with messages": { messages, count: 3 },
  primitives: { s: "x", n: 1.5, t: true, f: false, z: null },
  "numbers JSON cannot hold": [NaN, Infinity, -Infinity, -0, 0, 1e21],
  "undefined, functions and symbols": { u: undefined, f: () => 1, s: Symbol("s"), list: [undefined, () => 1, Symbol("t")] },
  bigints: { n: 1n, list: [2n, { deep: -3n }] },
  "a sparse array": sparse,
  dates: { d: new Date(86_400_000), invalid: new Date(Number.NaN) },
  "objects with toJSON": { a: { toJSON: (key: string) => `key was ${key}` }, b: { toJSON: () => undefined }, c: { toJSON: () => ({ x: 1n, m: messages[2] }) } },
  "a toJSON that returns a message (serialised as its fields)": { m: { toJSON: () => messages[0] } },
  "class instances (own enumerable fields)": { p: new Point(3, 4) },
  "boxed primitives": { n: new Number(2), s: new String("s"), b: new Boolean(false) },
  "Map, Set and typed arrays": { m: new Map([["a", 1]]), s: new Set([1]), u: new Uint8Array([1, 2]) },
  "a sparse array inside": { a: sparse },
  "an own __proto__ key": withProtoKey,
  "a shared (not cyclic) object": (() => {
    const shared = { v: 1 };
    return { a: shared, b: [shared, shared] };
  })(),
  "a Command": new Command({ resume: { answer: 1n }, update: { messages: [messages[0]] } }),
  "unicode and lone surrogates": { s: "é \u2028 \ud800 😀", "\ud83d": 1 },
  "a bare string": "text",
  "a bare function": () => 1,
};

t.test("toWire gives what the JSON round trip gives", async (t) => {
  for (const [name, value] of Object.entries(cases)) {
    const expected = oracle(value);
    t.strictSame(toWire(value), expected, name);
    // Key order too (what a response or an event's text shows).
    t.equal(JSON.stringify(toWire(value)), JSON.stringify(expected), `${name}: same text`);
  }
  t.ok(Object.is((toWire([-0]) as number[])[0], 0), "-0 becomes 0, as in JSON text");
  t.equal((oracle(cases["a message alone"]) as { type: string }).type, "human", "the oracle turns messages into dicts");
});

t.test("the copy is made of plain values and shares nothing with the input", async (t) => {
  const input = { messages: [messages[0]], meta: { list: [1, 2] } };
  const out = toWire(input) as { messages: Record<string, unknown>[]; meta: { list: number[] } };
  t.equal(Object.getPrototypeOf(out.messages[0]), Object.prototype);
  t.equal(out.messages[0].type, "human");
  t.equal(out.messages[0].content, "hello");
  t.not(out.meta, input.meta);
  t.not(out.meta.list, input.meta.list);
  out.meta.list.push(3);
  t.same(input.meta.list, [1, 2], "changing the copy leaves the input alone");
  const proto = toWire(withProtoKey) as Record<string, unknown>;
  t.equal(Object.getPrototypeOf(proto), Object.prototype, "an own __proto__ key does not become the prototype");
  t.same(Object.keys(proto), ["__proto__", "ok"]);
  t.equal(({} as Record<string, unknown>).polluted, undefined);
});

t.test("a cycle is refused as JSON.stringify refuses it", async (t) => {
  const cyclic: Record<string, unknown> = { a: 1 };
  cyclic.self = { back: cyclic };
  t.throws(() => toWire(cyclic), TypeError);
  t.throws(() => toWire(Object(1n)), TypeError, "a boxed BigInt");
});
