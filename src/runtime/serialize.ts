/**
 * Converts graph values to plain JSON as the official servers put them on the wire: LangChain
 * messages become `{...fields, type: "human" | "ai" | ...}` instead of their constructor form.
 */

interface Dictable {
  toDict(): { type: string; data: Record<string, unknown> };
}

function isDictable(value: unknown): value is Dictable {
  return typeof value === "object" && value !== null && typeof (value as Dictable).toDict === "function";
}

function replacer(this: Record<string, unknown>, key: string, value: unknown): unknown {
  // `this[key]` is the value before its own toJSON ran, so the message instance is still visible.
  const raw = this[key];
  if (isDictable(raw)) {
    const { type, data } = raw.toDict();
    return { ...data, type };
  }
  if (typeof value === "bigint") return value.toString();
  return value;
}

/** JSON text of `value` in wire form. */
export function toWireJsonText(value: unknown): string {
  return JSON.stringify(value === undefined ? null : value, replacer);
}

/** `value` as a plain JSON value in wire form (what an event stores and a response returns). */
export function toWireJson(value: unknown): unknown {
  return JSON.parse(toWireJsonText(value));
}
