/**
 * The ids the server makes (events, runs, threads, assistants, crons): UUIDv7 from a pool of random bytes
 * drawn 256 ids at a time. Pure: no I/O.
 */
import t from "tap";
import { validate, version } from "uuid";
import { newTimeOrderedId } from "../../src/util/new-id.js";

t.test("valid UUIDv7s, all different, in the order they were made, across several draws of the pool", async (t) => {
  const before = Date.now();
  const ids = Array.from({ length: 2000 }, () => newTimeOrderedId()); // 2,000 ids: 8 pools of 256
  const after = Date.now();
  t.ok(
    ids.every((id) => validate(id) && version(id) === 7),
    "each is a valid version-7 UUID",
  );
  t.ok(
    ids.every((id) => /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(id)),
    "RFC 9562 variant bits",
  );
  t.equal(new Set(ids).size, ids.length, "no two alike");
  t.ok(
    ids.every((id, i) => i === 0 || ids[i - 1] < id),
    "each sorts after the one made before it (a counter within a millisecond)",
  );
  const ms = (id: string) => parseInt(id.replace(/-/g, "").slice(0, 12), 16);
  t.ok(ms(ids[0]) >= before && ms(ids[ids.length - 1]) <= after + 1, "the leading 48 bits are the time they were made, in ms");
});

t.test("the random part differs between ids made in the same millisecond (74 random bits, the counter aside)", async (t) => {
  const ids = Array.from({ length: 300 }, () => newTimeOrderedId());
  const tails = new Set(ids.map((id) => id.slice(-10))); // the last 40 bits: random bytes only
  t.equal(tails.size, ids.length, "no repeated random tail");
});
