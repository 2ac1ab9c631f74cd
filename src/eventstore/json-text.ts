/**
 * The JSON text of event data, made once for data that cannot change: a large value's chunks are
 * sized (to group them into appends under the store's limit) and then stored, and each of those
 * would otherwise serialise a chunk of up to a third of a MiB again.
 *
 * Only data made by `frozenFlatData` or `dataWithText` is remembered: frozen, so its text cannot go
 * stale. Any other data is serialised each time it is asked for.
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

/**
 * Freezes `data` and gives it `text`, which its producer made as `JSON.stringify(data)` would, from
 * parts it serialised once for many events (a run's token metadata). The producer hands out no other
 * reference through which the parts could change: they are frozen too, or owned by `data` alone.
 */
export function dataWithText<T extends object>(data: T, text: string): Readonly<T> {
  texts.set(Object.freeze(data), text);
  return data;
}

/** JSON.stringify(data), kept for data made by frozenFlatData or dataWithText. */
export function jsonTextOf(data: unknown): string | undefined {
  if (typeof data !== "object" || data === null || !texts.has(data)) return JSON.stringify(data);
  let text = texts.get(data);
  if (text === undefined) texts.set(data, (text = JSON.stringify(data)));
  return text;
}
