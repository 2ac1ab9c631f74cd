/**
 * Idempotent run creation: a request carrying an `Idempotency-Key` claims the stream
 * `idempotency-{hash(caller, key)}` before it creates anything. The claim is an append with an
 * expected revision (`no_stream` for a new key, the stream's revision for an expired or released
 * one), so exactly one request wins, in this process or any other sharing the log. The winner
 * creates the run and records it on the same stream; a retry with the same body is answered with
 * that run, a retry with another body is a conflict. Event ids derive from the stream and
 * revision: an append retried after an ambiguous failure is not duplicated. Pure: no I/O.
 */
import { createHash } from "node:crypto";
import * as z from "zod";
import { v5 as uuidv5 } from "uuid";
import stringify from "safe-stable-stringify";
import type { EventsOf } from "./event-types.js";
import type { EventData } from "../eventstore/types.js";
import { RunRecordSchema, type RunRecord } from "./run-record.js";

export const IDEMPOTENCY_STREAM_PREFIX = "idempotency-";
/** Longest key accepted (as Stripe's); longer ones are refused with 422. */
export const MAX_IDEMPOTENCY_KEY_LENGTH = 255;
/** A claim whose run was never recorded (its process died in between) is taken over after this long. */
export const ABANDONED_CLAIM_MS = 60_000;

const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");

/** The key's stream: one per caller identity and key (two users' equal keys never meet). */
export const idempotencyStream = (key: string, identity: string) => `${IDEMPOTENCY_STREAM_PREFIX}${sha256(`${identity}\u0000${key}`).slice(0, 40)}`;

/** The fingerprint of what was asked: the thread (null for a stateless run) and the body, keys sorted. */
export const requestHash = (threadId: string | null, body: unknown) => sha256(stringify({ thread_id: threadId ?? null, body }) ?? "");

/** Item `index` of a batch: each run of a batch is its own key, derived from the request's. */
export const batchItemKey = (key: string, index: number) => `${key}#${index}`;

/** Why a key cannot be used (undefined: it can). */
export function idempotencyKeyError(key: string): string | undefined {
  if (key.length === 0) return "Idempotency-Key: must not be empty";
  if (key.length > MAX_IDEMPOTENCY_KEY_LENGTH) return `Idempotency-Key: at most ${MAX_IDEMPOTENCY_KEY_LENGTH} characters, got ${key.length}`;
  if (!/^[\x21-\x7e]+$/.test(key)) return "Idempotency-Key: printable ASCII characters only, without spaces";
  return undefined;
}

export const idempotencyEventSchemas = {
  /** A request took the key: it will create run `run_id` (on `thread_id`, or a new thread when null). */
  IdempotencyKeyClaimed: z.object({
    request_hash: z.string(),
    run_id: z.string(),
    thread_id: z.string().nullable(),
    claimed_at: z.string(),
    /** ms since epoch: from then on the key may be claimed again. */
    expires_at: z.number(),
  }),
  /**
   * The claimer created the run: every retry is answered with it, as its thread's RunEnqueued holds it. Only its ids:
   * the run's content stays in its thread's streams, so a purge of the thread removes it all (this key's stream is
   * not the thread's). Events written before held the whole run (`run`), content and all.
   */
  IdempotentRunCreated: z.union([z.object({ run_id: z.string(), thread_id: z.string() }), z.object({ run: RunRecordSchema })]),
  /** The claimer failed to create the run (a 404, a 409 of the thread…): the key is free again. */
  IdempotencyKeyReleased: z.object({ reason: z.string(), released_at: z.string() }),
} satisfies Record<string, z.ZodType>;

export type IdempotencyEvent = EventsOf<typeof idempotencyEventSchemas>;

export interface IdempotencyState {
  revision: bigint;
  requestHash: string;
  runId: string;
  claimedAtMs: number;
  expiresAtMs: number;
  /** Set once the claimer recorded the run: where its record is (or the record itself, as written before). */
  created?: RecordedRun;
  released: boolean;
}

/** Folds one event of the key's stream. */
export function evolveIdempotency(state: IdempotencyState | undefined, event: IdempotencyEvent, revision: bigint): IdempotencyState | undefined {
  switch (event.type) {
    case "IdempotencyKeyClaimed":
      return {
        revision,
        requestHash: event.data.request_hash,
        runId: event.data.run_id,
        claimedAtMs: Date.parse(event.data.claimed_at),
        expiresAtMs: event.data.expires_at,
        released: false,
      };
    case "IdempotentRunCreated": {
      const d = event.data;
      return state && { ...state, revision, created: "run" in d ? { run_id: d.run.run_id, thread_id: d.run.thread_id, run: d.run } : d };
    }
    case "IdempotencyKeyReleased":
      return state && { ...state, revision, released: true };
  }
}

/**
 * A key whose stream was purged with its thread (its events read as the store's tombstones, or, on EventStoreDB, read
 * as nothing up to `revision`): nothing of the request is left, and the key is free again after `revision`.
 */
export const forgottenKey = (revision: bigint): IdempotencyState => ({
  revision,
  requestHash: "",
  runId: "",
  claimedAtMs: 0,
  expiresAtMs: 0,
  released: true,
});

/**
 * Deterministic per request: the event a request (named by the run id it would create) appends at
 * `revision` of `stream` always has this id, so the log de-duplicates a retried append. Two
 * competing requests get different ids: with equal ids the log would take the loser's append for
 * a retry of the winner's and report success to both.
 */
const IDEMPOTENCY_NAMESPACE = "9a0f3c52-6f0e-4f4e-9d1b-3b7c1e2a8d55";
export const idempotencyEventId = (stream: string, revision: bigint, runId: string) => uuidv5(`${stream}@${revision}/${runId}`, IDEMPOTENCY_NAMESPACE);

export type IdempotencyDecision =
  /** Take the key: append `event` at `expected`, then create the run. */
  | { kind: "claim"; expected: "no_stream" | bigint; event: EventData }
  /** A retry of a request that created the run: answer with it, start nothing. */
  | { kind: "replay"; created: RecordedRun }
  /** The same request is being served right now (its run not recorded yet). */
  | { kind: "in_progress"; runId: string }
  /** The key was used for another request. */
  | { kind: "conflict"; detail: string };

export interface IdempotentCreate {
  stream: string;
  requestHash: string;
  runId: string;
  threadId: string | null;
  nowMs: number;
  now: string;
  ttlMs: number;
}

/** What a request with an Idempotency-Key does, given the key's stream. */
export function decideIdempotentCreate(state: IdempotencyState | undefined, cmd: IdempotentCreate): IdempotencyDecision {
  const free = !state || state.released || cmd.nowMs >= state.expiresAtMs || (!state.created && cmd.nowMs - state.claimedAtMs >= ABANDONED_CLAIM_MS);
  if (free) {
    const expected = state ? state.revision : "no_stream";
    const next = state ? state.revision + 1n : 0n;
    return {
      kind: "claim",
      expected,
      event: {
        id: idempotencyEventId(cmd.stream, next, cmd.runId),
        type: "IdempotencyKeyClaimed",
        data: { request_hash: cmd.requestHash, run_id: cmd.runId, thread_id: cmd.threadId, claimed_at: cmd.now, expires_at: cmd.nowMs + cmd.ttlMs },
      },
    };
  }
  if (state.requestHash !== cmd.requestHash) {
    return { kind: "conflict", detail: "Idempotency-Key was already used with a different request; use a new key for a new request" };
  }
  return state.created ? { kind: "replay", created: state.created } : { kind: "in_progress", runId: state.runId };
}

/** The run a key created: its ids, and its record where an event written before held it. */
export interface RecordedRun {
  run_id: string;
  thread_id: string;
  run?: RunRecord;
}

/** The claimer's record of the run it created (appended right after the claim): its ids, not its content. */
export const recordRun = (stream: string, claimRevision: bigint, run: Pick<RunRecord, "run_id" | "thread_id">): EventData => ({
  id: idempotencyEventId(stream, claimRevision + 1n, run.run_id),
  type: "IdempotentRunCreated",
  data: { run_id: run.run_id, thread_id: run.thread_id },
});

/** The claimer could not create the run: frees the key. */
export const releaseKey = (stream: string, claimRevision: bigint, runId: string, reason: string, now: string): EventData => ({
  id: idempotencyEventId(stream, claimRevision + 1n, runId),
  type: "IdempotencyKeyReleased",
  data: { reason, released_at: now },
});
