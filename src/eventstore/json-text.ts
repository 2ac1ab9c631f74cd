/**
 * The JSON text of event data, made once for data that cannot change: a large value's chunks are
 * sized (to group them into appends under the store's limit) and then stored, and each of those
 * would otherwise serialise a chunk of up to a third of a MiB again.
 *
 * Only data made by `frozenFlatData` is remembered: frozen, and holding nothing but primitives, so
 * its text can never go stale. Any other data is serialised each time it is asked for.
 */
const texts = new WeakMap<object, string | undefined>();

/** Freezes `data` (flat: primitives only) and marks its JSON text as one to keep once made. */
export function frozenFlatData<T extends Record<string, string | number | boolean | null>>(data: T): Readonly<T> {
  for (const value of Object.values(data)) {
    if (value !== null && typeof value === "object") throw new TypeError("frozenFlatData: values must be primitives");
  }
  texts.set(Object.freeze(data), undefined);
  return data;
}

/** JSON.stringify(data), kept for data made by frozenFlatData. */
export function jsonTextOf(data: unknown): string | undefined {
  if (typeof data !== "object" || data === null || !texts.has(data)) return JSON.stringify(data);
  let text = texts.get(data);
  if (text === undefined) texts.set(data, (text = JSON.stringify(data)));
  return text;
}
