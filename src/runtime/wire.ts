/** A value as the wire shows it: LangChain messages as `{...fields, type}`, everything plain JSON. */
export function toWire(value: unknown): unknown {
  if (value === undefined) return null;
  return JSON.parse(
    JSON.stringify(value, function (this: Record<string, unknown>, key: string, v: unknown) {
      const raw = this[key];
      if (raw !== null && typeof raw === "object" && typeof (raw as { toDict?: unknown }).toDict === "function") {
        const { type, data } = (raw as { toDict(): { type: string; data: Record<string, unknown> } }).toDict();
        return { ...data, type };
      }
      if (typeof v === "bigint") return v.toString();
      return v;
    }) ?? "null",
  );
}
