/**
 * Applies an `Idempotency-Key` to a run creation (the decisions are src/domain/idempotency.ts):
 * claim the key's stream, create the run, record it there. A retry with the same body gets the
 * recorded run and starts nothing; a concurrent twin waits for the first to record its run. The
 * log is the only memory of a key: it holds across restarts and across processes sharing it.
 */
import { PURGED_EVENT_TYPE, WrongExpectedVersionError, type AppendResult, type EventStore, type RecordedEvent } from "../eventstore/types.js";
import type { CommandPipeline } from "../commands/pipeline.js";
import {
  decideIdempotentCreate,
  evolveIdempotency,
  forgottenKey,
  idempotencyKeyError,
  idempotencyStream,
  recordRun,
  releaseKey,
  requestHash,
  type IdempotencyEvent,
  type IdempotencyState,
  type RecordedRun,
} from "../domain/idempotency.js";
import { conflict, invalid } from "../domain/errors.js";
import type { RunRecord } from "../domain/run-record.js";
import { threadStream } from "../domain/threads.js";
import { isEvent } from "../domain/event-of.js";

export interface IdempotentCreateDeps {
  store: EventStore;
  commands: CommandPipeline;
  /** The run with this id, if the read models show it (asked again at each turn of the wait for the claimer). */
  findRun(runId: string): Promise<RunRecord | undefined>;
  now(): string;
  ttlMs: number;
  /** How long a twin waits for the first request to record its run before it answers 409. */
  inProgressWaitMs: number;
}

export interface IdempotentRequest {
  key: string;
  /** The caller's identity ("" without custom auth): keys are per caller. */
  identity: string;
  threadId: string | null;
  body: unknown;
  runId: string;
}

const MAX_ATTEMPTS = 5;

/**
 * The key as a header gives it (undefined: none; several: the last), checked: a client's key is
 * 422 when malformed. Keys the server makes itself (a cron tick's) are not client input.
 */
export function idempotencyKeyOf(headers: Record<string, string | string[] | undefined>): string | undefined {
  const value = headers["idempotency-key"];
  const key = Array.isArray(value) ? value[value.length - 1] : value;
  const error = key === undefined ? undefined : idempotencyKeyError(key);
  if (error) throw invalid(error);
  return key;
}

/**
 * The key's state from its stream. A stream purged with its thread reads as tombstones on the embedded store, and as
 * nothing on EventStoreDB, whose revisions go on after the deleted ones (`deletedUpTo`, learnt from a refused claim).
 */
async function loadKey(store: EventStore, stream: string, deletedUpTo: bigint | undefined): Promise<IdempotencyState | undefined> {
  let state: IdempotencyState | undefined;
  for (const e of await store.readStream(stream)) {
    state = e.type === PURGED_EVENT_TYPE ? forgottenKey(e.revision) : evolveIdempotency(state, e as unknown as IdempotencyEvent, e.revision);
  }
  return state ?? (deletedUpTo === undefined ? undefined : forgottenKey(deletedUpTo));
}

/**
 * The run a key created, as it was answered: its thread's RunEnqueued holds it (read from the log, which keeps it
 * when the run or its thread is deleted). Gone once the thread was purged: the key's answer went with it.
 */
async function createdRun(store: EventStore, created: RecordedRun): Promise<RunRecord> {
  if (created.run) return created.run;
  for (const e of await store.readStream(threadStream(created.thread_id))) {
    if (isEvent(e, "RunEnqueued") && e.data.run.run_id === created.run_id) return e.data.run;
  }
  throw conflict(`Idempotency-Key: the run it created (${created.run_id}) was purged with its thread; use a new key for a new request`);
}

/** Resolves at the next event of `stream` after `revision`, or when `ms` have passed. */
async function nextEvent(store: EventStore, stream: string, revision: bigint, ms: number): Promise<RecordedEvent | undefined> {
  const subscription = store.subscribeToStream(stream, { fromRevision: revision });
  const timer = setTimeout(() => void subscription.close(), ms);
  try {
    for await (const item of subscription) if (item.kind === "event") return item.event;
    return undefined;
  } finally {
    clearTimeout(timer);
    await subscription.close();
  }
}

/** Runs `create` at most once per key and body; see the module comment. */
export async function createOnce(deps: IdempotentCreateDeps, req: IdempotentRequest, create: () => Promise<RunRecord>): Promise<RunRecord> {
  const stream = idempotencyStream(req.key, req.identity);
  const hash = requestHash(req.threadId, req.body);
  let deletedUpTo: bigint | undefined;
  for (let attempt = 1; ; attempt++) {
    const state = await loadKey(deps.store, stream, deletedUpTo);
    const now = deps.now();
    const decision = decideIdempotentCreate(state, {
      stream,
      requestHash: hash,
      runId: req.runId,
      threadId: req.threadId,
      nowMs: Date.parse(now),
      now,
      ttlMs: deps.ttlMs,
    });
    if (decision.kind === "conflict") throw conflict(decision.detail);
    if (decision.kind === "replay") return createdRun(deps.store, decision.created);
    if (decision.kind === "in_progress") {
      // The claimer may have created its run and then died (or be slow) before recording it: that run
      // is this request's answer, recorded now at the claim's revision (the claimer's own record, if it
      // comes first, wins the same way).
      const created = await deps.findRun(decision.runId);
      if (created) {
        await deps.commands.append({ stream, events: [recordRun(stream, state!.revision, created)], expected: state!.revision, onConflict: "lose" });
        return created;
      }
      if (attempt >= MAX_ATTEMPTS || !(await nextEvent(deps.store, stream, state!.revision, deps.inProgressWaitMs))) {
        throw conflict("A request with this Idempotency-Key is still in progress; retry later");
      }
      continue;
    }
    let claim: AppendResult;
    try {
      claim = await deps.commands.append({ stream, events: [decision.event], expected: decision.expected });
    } catch (error) {
      if (!(error instanceof WrongExpectedVersionError)) throw error;
      // Another request took it first: decide again on what it wrote. Or the stream read as nothing and has
      // revisions: it was deleted (a purge on EventStoreDB), and the key is free after them.
      if (state === undefined && typeof error.actual === "bigint") deletedUpTo = error.actual;
      if (attempt < MAX_ATTEMPTS) continue;
      throw conflict("A request with this Idempotency-Key is still in progress; retry later");
    }
    const claimed = claim.nextExpectedRevision;
    let run: RunRecord;
    try {
      run = await create();
    } catch (e) {
      // Nothing was created: the key is free for the retry the client will make.
      const release = releaseKey(stream, claimed, req.runId, (e as Error).message ?? "failed", deps.now());
      await deps.commands.append({ stream, events: [release], expected: claimed }).catch(() => undefined);
      throw e;
    }
    // A twin that found the run first recorded it already (the same event): either record stands.
    await deps.commands.append({ stream, events: [recordRun(stream, claimed, run)], expected: claimed, onConflict: "lose" });
    return run;
  }
}
