/**
 * Timestamps as the API writes them: ISO 8601 in UTC with a `+00:00` offset, the Python server's
 * format (A2A v1.0 converts them to `Z` at its own edge).
 */

/** The largest distance from the epoch a Date can hold. */
const MAX_TIME_MS = 8.64e15;
let cachedSecond = Number.NaN;
let cachedPrefix = "";

/**
 * `Date#toISOString` formats the whole date on every call and a run stamps several times (its creation, claim, end,
 * its thread's update), so the text up to the second is kept for the second it names and only the
 * milliseconds are written per call (in UTC a second's text depends on nothing but the second).
 */
export const isoOf = (ms: number): string => {
  const t = Math.trunc(ms); // as Date does: a fraction of a millisecond is cut off, towards zero
  if (!(Math.abs(t) <= MAX_TIME_MS)) throw new RangeError("Invalid time value"); // Date's range and message; NaN too
  const second = Math.floor(t / 1000);
  if (second !== cachedSecond) {
    cachedPrefix = new Date(second * 1000).toISOString().slice(0, -4); // "…T22:25:13.000Z" → "…T22:25:13."
    cachedSecond = second;
  }
  const millis = t - second * 1000;
  return `${cachedPrefix}${millis < 10 ? "00" : millis < 100 ? "0" : ""}${millis}+00:00`;
};

export const isoNow = (): string => isoOf(Date.now());
