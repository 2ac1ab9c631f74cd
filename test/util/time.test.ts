import t from "tap";
import fc from "fast-check";
import { isoOf } from "../../src/util/time.js";

/** What isoOf must equal: Date's own text, with the Python server's offset. */
const byDate = (ms: number) => new Date(ms).toISOString().replace("Z", "+00:00");

t.test("isoOf writes what Date#toISOString writes, with +00:00", async (t) => {
  for (const ms of [
    0, -0, 1, 9, 10, 99, 100, 999, 1000, -1, -999, -1000, -1001, 1.5, -1.5, 1764282313123, 1764282313999.9, -62198755200000, 253402300799999, 253402300800000,
    -8.64e15, 8.64e15,
  ]) {
    t.equal(isoOf(ms), byDate(ms), String(ms));
  }
  // Calls that share a second reuse its text; alternating seconds must not mix them up.
  t.equal(isoOf(1764282313001), "2025-11-27T22:25:13.001+00:00");
  t.equal(isoOf(1764282314002), "2025-11-27T22:25:14.002+00:00");
  t.equal(isoOf(1764282313999), "2025-11-27T22:25:13.999+00:00");
  fc.assert(
    fc.property(
      fc.oneof(fc.integer({ min: -8.64e15, max: 8.64e15 }), fc.double({ min: -8.64e15, max: 8.64e15, noNaN: true }), fc.integer({ min: 1.7e12, max: 1.8e12 })),
      (ms) => isoOf(ms) === byDate(ms),
    ),
    { numRuns: 20_000 },
  );
});

t.test("isoOf refuses what Date refuses", async (t) => {
  for (const ms of [NaN, Infinity, -Infinity, 8.64e15 + 1, -8.64e15 - 1]) {
    t.throws(() => byDate(ms), RangeError, `Date refuses ${ms}`);
    t.throws(() => isoOf(ms), RangeError, `isoOf refuses ${ms}`);
  }
  isoOf(8.64e15); // the cached second is now the range's last: a time beyond it is still refused
  t.throws(() => isoOf(8.64e15 + 1), RangeError);
});
