import { v5 as uuidv5 } from "uuid";
import type { AppendTicket, EventStore, RecordedEvent } from "../eventstore/types.js";
import type { CommandPipeline } from "../commands/pipeline.js";
import type { ReadModels } from "../read-models/all.js";
import { unfoldable } from "../read-models/quarantine.js";
import { runStream, emptyRunStream, evolveRunStream, threadFinishOf, type RunEnded, type RunStreamEvent, type RunStreamState } from "../domain/runs.js";
import { threadStream } from "../domain/threads.js";
import type { RunRecord } from "../domain/run-record.js";

/** Namespace of the deterministic ids of completion marks (a retried mark is deduplicated by the store). */
const COMPLETION_NAMESPACE = "0b7f4a3e-31c6-4a55-9f0b-6f1c2b8f9d21";
export const finishedMarkId = (runId: string) => uuidv5(`RunFinished:${runId}`, COMPLETION_NAMESPACE);

export interface CompletionDeps {
  store: EventStore;
  commands: CommandPipeline;
  readModels: ReadModels;
  now(): string;
  /** Drops the checkpoints newer than `afterCheckpointId` (what a rolled-back run wrote). */
  discardCheckpointsAfter?(threadId: string, afterCheckpointId: string | null, reason: string): Promise<void>;
  /**
   * Deletes a stateless run's temporary thread, the way every thread is deleted (its hooks, its decider,
   * its checkpoints), unless it is no longer that run's: another run is active on it, or the id was
   * deleted and created again after `runCreatedAt`.
   */
  deleteTemporaryThread?(threadId: string, runCreatedAt: string): Promise<void>;
}

/** Reads and folds `run-{id}` from the log (used when the local view may be behind). */
export async function loadRunStream(store: EventStore, runId: string): Promise<RunStreamState> {
  let state = emptyRunStream;
  for (const e of await store.readStream(runStream(runId))) {
    try {
      state = evolveRunStream(state, { type: e.type, data: e.data } as RunStreamEvent, e.revision);
    } catch (error) {
      // A clear error for this one run (the event that cannot be folded, and why), never a stray TypeError.
      throw unfoldable(e, error);
    }
  }
  return state;
}

/** How many events from its end a run stream is searched for its RunEnded (a lease renewal may race past it). */
const TERMINAL_SEARCH = 8;

/** A run's RunEnded, if it has ended: what /wait and /join answer, and where a thread feed moves on. */
export async function readRunEnd(store: EventStore, runId: string): Promise<RecordedEvent | undefined> {
  const stream = runStream(runId);
  // Almost always the last event: one the store still holds in memory answers without a query, however
  // long ago the run's first events left that memory (a read of several from the end needs them all held).
  const [last] = await store.readStream(stream, { direction: "backwards", fromRevision: "end", maxCount: 1 });
  if (!last || last.type === "RunEnded") return last;
  const tail = await store.readStream(stream, { direction: "backwards", fromRevision: "end", maxCount: TERMINAL_SEARCH });
  return tail.find((e) => e.type === "RunEnded");
}

/**
 * Everything that follows a RunEnded: the thread's RunFinished mark (idempotent: deterministic
 * event id), the rollback of the run's checkpoints, and the removal of a temporary thread.
 * Safe to call again for the same run (crash recovery does).
 */
export async function completeOnThread(
  deps: CompletionDeps,
  run: RunRecord,
  ended: RunEnded,
  /** The thread's latest checkpoint before the run started; undefined when it never started. */
  baseCheckpointId: string | null | undefined,
  /** `after`: the mark depends on these appends (the run's RunEnded, issued just before): written with them, only if they are. */
  options: { after?: readonly AppendTicket[] } = {},
): Promise<void> {
  if (ended.status === "rollback" && baseCheckpointId !== undefined) {
    await deps.discardCheckpointsAfter?.(run.thread_id, baseCheckpointId, `run ${run.run_id} rolled back`);
  }
  const mark = { id: finishedMarkId(run.run_id), type: "RunFinished", data: threadFinishOf(run.run_id, ended) };
  await deps.commands.append({
    stream: threadStream(run.thread_id),
    events: [mark],
    expected: "any",
    waitFor: "fold",
    ...(options.after ? { after: options.after, urgent: true } : {}),
  });
  if (run.kwargs.temporary) await deps.deleteTemporaryThread?.(run.thread_id, run.created_at);
}
