/**
 * Graph values as the official servers put them on the wire: LangChain messages become
 * `{...fields, type: "human" | "ai" | ...}` (their `toDict()`) instead of their constructor form,
 * bigints their decimal text, everything else plain JSON.
 *
 * The result is what `JSON.parse(JSON.stringify(value, replacer))` gives (the replacer turning a
 * message into its dict and a bigint into text), built in one walk instead: no text in between, and
 * a message's own `toJSON()` (LangChain's constructor form, as costly as `toDict()` itself) is not
 * computed just to be replaced: every `values` chunk carries the whole conversation, so the work
 * saved grows with it. test/runtime/wire.test.ts holds the round trip as the oracle.
 */

interface Dictable {
  toDict(): { type: string; data: Record<string, unknown> };
}

function isDictable(value: unknown): value is Dictable {
  return typeof value === "object" && value !== null && typeof (value as Dictable).toDict === "function";
}

/** A copy of `value` in wire form, made only of plain objects, arrays, strings, finite numbers, booleans and null. */
export function toWire(value: unknown): unknown {
  const out = property("", value, new Set());
  return out === undefined ? null : out;
}

/** JSON's SerializeJSONProperty, producing the value JSON.parse would give back (undefined: left out). */
function property(key: string, raw: unknown, ancestors: Set<object>): unknown {
  let value = raw;
  if (isDictable(raw)) {
    // Where JSON.stringify would call toJSON and then have the replacer throw its result away.
    const { type, data } = raw.toDict();
    value = { ...data, type };
  } else {
    if ((typeof value === "object" && value !== null) || typeof value === "bigint") {
      const toJSON = (value as { toJSON?: unknown }).toJSON;
      if (typeof toJSON === "function") value = toJSON.call(value, key);
    }
    if (typeof value === "bigint") return value.toString();
  }
  if (typeof value === "object" && value !== null) {
    // Boxed primitives serialise as their primitive (a boxed BigInt is refused, as by JSON.stringify).
    if (value instanceof Number) value = Number(value);
    else if (value instanceof String) value = String(value);
    else if (value instanceof Boolean) value = value.valueOf();
    else if (value instanceof BigInt) throw new TypeError("Do not know how to serialize a BigInt");
  }
  switch (typeof value) {
    case "string":
    case "boolean":
      return value;
    case "number":
      // JSON has no NaN, Infinity or -0.
      return Number.isFinite(value) ? value + 0 : null;
    case "object":
      return value === null ? null : container(value, ancestors);
    default:
      return undefined; // undefined, functions, symbols
  }
}

function container(value: object, ancestors: Set<object>): unknown {
  if (ancestors.has(value)) throw new TypeError("Converting circular structure to JSON");
  ancestors.add(value);
  try {
    if (Array.isArray(value)) {
      const out = new Array<unknown>(value.length);
      for (let i = 0; i < value.length; i++) {
        const item = property(String(i), value[i], ancestors);
        out[i] = item === undefined ? null : item;
      }
      return out;
    }
    const out: Record<string, unknown> = {};
    const source = value as Record<string, unknown>;
    for (const key of Object.keys(source)) {
      const item = property(key, source[key], ancestors);
      if (item === undefined) continue;
      // An own "__proto__" key stays a key (as JSON.parse makes it), not the copy's prototype.
      if (key === "__proto__") Object.defineProperty(out, key, { value: item, enumerable: true, writable: true, configurable: true });
      else out[key] = item;
    }
    return out;
  } finally {
    ancestors.delete(value);
  }
}
