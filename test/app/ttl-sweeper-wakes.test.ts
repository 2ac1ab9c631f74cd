import t from "tap";
import { changesThreadExpiry } from "../../src/app/ttl-sweeper.js";
import { decideCreateThread, decideDeleteThread, decidePatchThread, evolveThread, type ThreadEvent, type ThreadState } from "../../src/domain/threads.js";
import type { Decision } from "../../src/domain/decision.js";

const NOW = "2026-11-26T12:00:00.000Z";
const LATER = "2026-11-26T13:00:00.000Z";
const stream = "thread-0193a0f0-0000-7000-8000-000000000001";

/** The single event a decision makes, as the sweeper sees it once applied. */
function applied(decision: Decision, streamId = stream) {
  if (!decision.ok || decision.events.length !== 1) throw new Error(`expected one event, got ${JSON.stringify(decision)}`);
  const [e] = decision.events;
  return { streamId, type: e.type, data: e.data };
}

const created = (expires_at?: string) =>
  decideCreateThread(undefined, { thread_id: stream.slice(7), metadata: {}, if_exists: "raise", ...(expires_at ? { expires_at } : {}) }, NOW);
const stateOf = (decision: Decision): ThreadState => {
  const e = applied(decision);
  return evolveThread(undefined, { type: e.type, data: e.data } as ThreadEvent, 0n);
};

t.test("the TTL sweeper is woken only by thread events that can move an expiry", async (t) => {
  t.equal(changesThreadExpiry(applied(created())), false, "a thread created without a TTL");
  t.equal(changesThreadExpiry(applied(created(LATER))), true, "a thread created with a TTL");
  const live = stateOf(created(LATER));
  t.equal(live.expiresAt, LATER, "the fold keeps the expiry the event carries");
  t.equal(changesThreadExpiry(applied(decidePatchThread(live, { a: 1 }, NOW))), false, "a metadata-only update keeps the expiry");
  t.equal(changesThreadExpiry(applied(decidePatchThread(live, {}, NOW, LATER))), true, "an update with a new TTL");
  t.equal(
    changesThreadExpiry({ streamId: stream, type: "ThreadUpdated", data: { metadata: {}, updated_at: NOW, expires_at: null } }),
    true,
    "an update clearing the TTL",
  );
  t.equal(changesThreadExpiry(applied(decideDeleteThread(live, NOW))), true, "a delete");
  t.equal(
    changesThreadExpiry({ streamId: stream, type: "ThreadPurged", data: { thread_id: stream.slice(7), purged_at: NOW, purged_by: "system", streams: 1 } }),
    true,
    "a purge",
  );
  t.equal(changesThreadExpiry({ streamId: stream, type: "RunEnqueued", data: {} }), false, "a run on the thread");
  t.equal(
    changesThreadExpiry({ streamId: "run-0193a0f0-0000-7000-8000-000000000002", type: "ThreadCreated", data: { expires_at: LATER } }),
    false,
    "not a thread stream",
  );
});
