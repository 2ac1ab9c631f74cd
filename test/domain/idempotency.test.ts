import t from "tap";
import {
  ABANDONED_CLAIM_MS,
  batchItemKey,
  decideIdempotentCreate,
  evolveIdempotency,
  forgottenKey,
  idempotencyEventId,
  idempotencyKeyError,
  idempotencyStream,
  recordRun,
  releaseKey,
  requestHash,
  type IdempotencyEvent,
  type IdempotencyState,
} from "../../src/domain/idempotency.js";
import { schemaForEventType } from "../../src/domain/events.js";
import type { RunRecord } from "../../src/domain/run-record.js";

/** The pure parts of idempotent run creation: key streams, fingerprints, the fold and the decider. */

const T0 = Date.parse("2026-01-01T00:00:00Z");
const TTL = 60 * 60 * 1000;
const stream = idempotencyStream("key-1", "alice");
const cmd = (over: Partial<Parameters<typeof decideIdempotentCreate>[1]> = {}) => ({
  stream,
  requestHash: requestHash(null, { assistant_id: "agent" }),
  runId: "run-1",
  threadId: null,
  nowMs: T0,
  now: new Date(T0).toISOString(),
  ttlMs: TTL,
  ...over,
});
const run = {
  run_id: "run-1",
  thread_id: "thread-1",
  assistant_id: "a",
  created_at: "x",
  updated_at: "x",
  status: "pending",
  metadata: {},
  multitask_strategy: "enqueue",
  kwargs: { config: {}, context: {}, stream_mode: ["values"], temporary: true, subgraphs: false, resumable: false },
} as RunRecord;

function fold(events: { type: string; data: unknown }[]): IdempotencyState | undefined {
  return events.reduce<IdempotencyState | undefined>((s, e, i) => evolveIdempotency(s, e as IdempotencyEvent, BigInt(i)), undefined);
}

t.test("keys: one stream per caller and key; fingerprints ignore key order; batch items are keys of their own", async (t) => {
  t.equal(idempotencyStream("key-1", "alice"), stream, "deterministic");
  t.not(idempotencyStream("key-1", "bob"), stream, "another caller's equal key is another stream");
  t.match(stream, /^idempotency-[0-9a-f]{40}$/);
  // Ids reach the core canonical (the request schemas lower-case them, src/domain/ids.ts): only key order is left to ignore.
  t.equal(requestHash("t", { a: 1, b: { c: 2, d: 3 } }), requestHash("t", { b: { d: 3, c: 2 }, a: 1 }), "key order does not matter");
  t.not(requestHash(null, { a: 1 }), requestHash("t", { a: 1 }), "the thread is part of the request");
  t.not(requestHash(null, { a: 1 }), requestHash(null, { a: 2 }));
  t.not(batchItemKey("k", 0), batchItemKey("k", 1));
  t.equal(idempotencyKeyError("abc-123_XYZ"), undefined);
  t.match(idempotencyKeyError("x".repeat(256)), /at most 255/);
  t.match(idempotencyKeyError(""), /empty/);
  t.match(idempotencyKeyError("has space"), /printable/);
});

t.test("a new key is claimed with no_stream, with a deterministic event id", async (t) => {
  const d = decideIdempotentCreate(undefined, cmd());
  t.equal(d.kind, "claim");
  if (d.kind !== "claim") return;
  t.equal(d.expected, "no_stream");
  t.equal(d.event.id, idempotencyEventId(stream, 0n, "run-1"));
  const again = decideIdempotentCreate(undefined, cmd());
  t.equal(again.kind === "claim" ? again.event.id : undefined, d.event.id, "the same request's claim has the same id (the log de-duplicates a retry)");
  const rival = decideIdempotentCreate(undefined, cmd({ runId: "run-2" }));
  t.not(rival.kind === "claim" ? rival.event.id : undefined, d.event.id, "a competing request's claim has another id: the log cannot take it for a retry");
  t.match(d.event.data, { run_id: "run-1", thread_id: null, expires_at: T0 + TTL });
  t.ok(schemaForEventType("IdempotencyKeyClaimed")!.safeParse(d.event.data).success, "in the event catalogue");
});

t.test("claimed and recorded: the same request replays the run, another request conflicts", async (t) => {
  const claim = decideIdempotentCreate(undefined, cmd());
  if (claim.kind !== "claim") return t.fail("claim");
  const recorded = recordRun(stream, 0n, run);
  t.same(recorded.data, { run_id: run.run_id, thread_id: run.thread_id }, "the record names the run: its content stays in its thread's streams");
  t.ok(schemaForEventType("IdempotentRunCreated")!.safeParse(recorded.data).success);
  const state = fold([claim.event, recorded]);
  t.same(decideIdempotentCreate(state, cmd({ nowMs: T0 + 1000, runId: "run-2" })), {
    kind: "replay",
    created: { run_id: run.run_id, thread_id: run.thread_id },
  });
  // A record written before held the whole run: it is still the answer.
  const before = { id: "e", type: "IdempotentRunCreated", data: { run } };
  t.ok(schemaForEventType("IdempotentRunCreated")!.safeParse(before.data).success, "the earlier form is still in the catalogue");
  t.same(decideIdempotentCreate(fold([claim.event, before]), cmd({ nowMs: T0 + 1000 })), {
    kind: "replay",
    created: { run_id: run.run_id, thread_id: run.thread_id, run },
  });
  const other = decideIdempotentCreate(state, cmd({ requestHash: requestHash(null, { assistant_id: "other" }) }));
  t.equal(other.kind, "conflict");
});

t.test("claimed, not yet recorded: a twin waits (in progress); after the abandonment window the key is taken over", async (t) => {
  const claim = decideIdempotentCreate(undefined, cmd());
  if (claim.kind !== "claim") return t.fail("claim");
  const state = fold([claim.event]);
  t.same(decideIdempotentCreate(state, cmd({ nowMs: T0 + 10 })), { kind: "in_progress", runId: "run-1" });
  t.equal(decideIdempotentCreate(state, cmd({ nowMs: T0 + 10, requestHash: "other" })).kind, "conflict");
  const takeover = decideIdempotentCreate(state, cmd({ nowMs: T0 + ABANDONED_CLAIM_MS, runId: "run-2" }));
  t.match(takeover, { kind: "claim", expected: 0n });
});

t.test("expired or released: claimed again at the stream's revision (any body)", async (t) => {
  const claim = decideIdempotentCreate(undefined, cmd());
  if (claim.kind !== "claim") return t.fail("claim");
  const recorded = fold([claim.event, recordRun(stream, 0n, run)]);
  const later = decideIdempotentCreate(recorded, cmd({ nowMs: T0 + TTL, requestHash: "another body", runId: "run-9" }));
  t.match(later, { kind: "claim", expected: 1n });
  if (later.kind === "claim") t.equal(later.event.id, idempotencyEventId(stream, 2n, "run-9"));
  t.equal(decideIdempotentCreate(recorded, cmd({ nowMs: T0 + TTL - 1 })).kind, "replay", "not a millisecond before");
  const released = fold([claim.event, releaseKey(stream, 0n, "run-1", "Thread not found", "now")]);
  t.ok(schemaForEventType("IdempotencyKeyReleased")!.safeParse(releaseKey(stream, 0n, "run-1", "x", "now").data).success);
  t.match(decideIdempotentCreate(released, cmd({ nowMs: T0 + 5 })), { kind: "claim", expected: 1n });
});

t.test("a key purged with its thread is forgotten: free for any request, claimed after its last revision", async (t) => {
  const decision = decideIdempotentCreate(forgottenKey(3n), cmd({ requestHash: requestHash("thread-1", { other: true }) }));
  t.equal(decision.kind, "claim", "another request's body is no conflict: nothing of the first is left");
  t.equal(decision.kind === "claim" && decision.expected, 3n, "the claim expects the stream's last revision");
  t.match(decision, { event: { type: "IdempotencyKeyClaimed", data: { request_hash: requestHash("thread-1", { other: true }) } } });
});
