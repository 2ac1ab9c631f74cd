import { randomFillSync } from "node:crypto";
import { v7 as uuidv7 } from "uuid";

/**
 * Random bytes for 256 ids, drawn at once. `uuid` draws 256 bytes from the system's generator for
 * every 16 of its ids; one draw per 256 ids makes a sixteenth as many calls into the generator.
 */
const POOL_IDS = 256;
const pool = new Uint8Array(16 * POOL_IDS);
let used = pool.length;
/** uuid's own monotonic state for v7 ids, which it keeps only when it draws the random bytes itself. */
let lastMs = -Infinity;
let seq = 0;

/**
 * A new UUIDv7: its leading bits are time (and a counter within a millisecond, so ids made in one
 * process sort in the order they were made), the rest random. Used for every id the server makes:
 * events, runs, threads, assistants, crons. A new entity's keys then land at the end of the log's
 * indexes and of the read models' primary keys instead of on a random page of each: a batch of
 * creates dirties a few pages, not one per create. Its 74 random bits keep it unguessable.
 */
export function newTimeOrderedId(): string {
  if (used === pool.length) {
    randomFillSync(pool);
    used = 0;
  }
  const random = pool.subarray(used, (used += 16));
  const now = Date.now();
  if (now > lastMs) {
    seq = (random[6] << 23) | (random[7] << 16) | (random[8] << 8) | random[9];
    lastMs = now;
  } else {
    seq = (seq + 1) | 0;
    if (seq === 0) lastMs++;
  }
  return uuidv7({ random, msecs: lastMs, seq });
}
