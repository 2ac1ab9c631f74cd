/**
 * The thread stream on the log: follows `thread-{id}` and, in the order they were enqueued, the
 * `run-{id}` of each of its runs to that run's end; yields the SSE events the modes ask for, each
 * with the id that resumes just after it (see domain/thread-stream.ts). Never talks to a worker.
 */
import type { AppContext } from "./context.js";
import { threadState } from "./threads.js";
import type { EventStore, RecordedEvent, Subscription } from "../eventstore/types.js";
import { chunkOf, SKIP, tailRunMapped } from "../runtime/run-tail.js";
import { isLargeValueMarker } from "../eventstore/large-values.js";
import { runStream } from "../domain/runs.js";
import { threadStream } from "../domain/threads.js";
import {
  endsRunStream,
  endsThreadStream,
  runEnqueuedBy,
  runEventOutputs,
  threadEventOutputs,
  threadStreamEventId,
  type ThreadStreamMode,
  type ThreadStreamOutput,
  type ThreadStreamStart,
} from "../domain/thread-stream.js";

export interface ThreadStreamEvent extends ThreadStreamOutput {
  id: string;
}

/** How many thread events a page of the backward search for the active runs reads. */
const PAGE = 100;

/**
 * The thread's present, where a stream without `Last-Event-ID` starts (the Python server's "from
 * now"): the runs still active are followed from their last event (the earliest one's place), a
 * thread without active runs from its last event.
 */
export async function presentOf(ctx: AppContext, threadId: string): Promise<ThreadStreamStart> {
  await ctx.commands.catchUpWithStream(threadStream(threadId));
  const state = threadState(ctx, threadId);
  if (!state) return { kind: "beginning" };
  const active = new Set(state.activeRuns);
  if (active.size === 0) return { kind: "after", thread: state.revision };
  // The earliest active run's RunEnqueued: active runs are recent, so search backwards.
  let earliest: { thread: bigint; runId: string } | undefined;
  let from: bigint | "end" = "end";
  while (active.size > 0) {
    const page = await ctx.store.readStream(threadStream(threadId), { direction: "backwards", fromRevision: from, maxCount: PAGE });
    for (const e of page) {
      const runId = runEnqueuedBy(e);
      if (runId && active.delete(runId)) earliest = { thread: e.revision, runId };
    }
    const last = page[page.length - 1];
    if (page.length < PAGE || !last || last.revision === 0n) break;
    from = last.revision - 1n;
  }
  if (!earliest) return { kind: "after", thread: state.revision };
  const [tail] = await ctx.store.readStream(runStream(earliest.runId), { direction: "backwards", fromRevision: "end", maxCount: 1 });
  return tail ? { kind: "after", thread: earliest.thread, run: tail.revision } : { kind: "after", thread: earliest.thread };
}

/** Closes the subscription when the signal aborts (a pending read then ends). */
function closeOnAbort(subscription: Subscription, signal: AbortSignal): () => void {
  const close = () => void subscription.close();
  if (signal.aborted) close();
  signal.addEventListener("abort", close, { once: true });
  return () => signal.removeEventListener("abort", close);
}

/**
 * The events of one run after `after` (exclusive; undefined = all), to its terminal event, those of one log event
 * at a time (through the run's tail, which maps as it reads); undefined when resumed after its end.
 */
async function followRun(
  store: EventStore,
  runId: string,
  threadRevision: bigint,
  after: bigint | undefined,
  modes: readonly ThreadStreamMode[],
  signal: AbortSignal,
): Promise<AsyncIterableIterator<ThreadStreamEvent[]> | undefined> {
  if (after !== undefined) {
    // Resuming after the run's terminal event: nothing of it is left to send (nor will be).
    const [last] = await store.readStream(runStream(runId), { fromRevision: after, maxCount: 1 });
    if (!last || endsRunStream(last)) return undefined;
  }
  const map = (e: RecordedEvent): ThreadStreamEvent[] | typeof SKIP | Promise<ThreadStreamEvent[]> => {
    const outputs = runEventOutputs(modes, runId, e);
    if (outputs.length === 0) return SKIP;
    const id = threadStreamEventId(threadRevision, e.revision);
    // A chunk too large for one event was written beside the run (see RunStreamWriter).
    if (!outputs.some((out) => isLargeValueMarker(out.data))) return outputs.map((out) => ({ id, event: out.event, data: out.data }));
    return Promise.all(outputs.map(async (out) => ({ id, event: out.event, data: await chunkOf(store, out) })));
  };
  return tailRunMapped(store, runId, after ?? "start", signal, { map });
}

/**
 * Follows the thread from `start` until the thread is deleted or `signal` aborts; the caller
 * checked the thread exists and may be read. `firstRevision`: where the thread's current
 * incarnation begins (its ThreadCreated) when its id was used before; nothing earlier is sent.
 */
export async function* followThread(
  store: EventStore,
  threadId: string,
  start: ThreadStreamStart,
  modes: readonly ThreadStreamMode[],
  signal: AbortSignal,
  firstRevision = 0n,
): AsyncGenerator<ThreadStreamEvent> {
  // Resuming re-reads the thread event last seen: its run may have more to send.
  // Exclusive starts: -1 stands for the stream's start.
  const resume = start.kind === "beginning" || start.thread === 0n ? -1n : start.thread - 1n;
  const from = resume > firstRevision - 1n ? resume : firstRevision - 1n;
  const subscription = store.subscribeToStream(threadStream(threadId), { fromRevision: from < 0n ? "start" : from });
  const release = closeOnAbort(subscription, signal);
  try {
    for await (const item of subscription) {
      if (signal.aborted) break;
      if (item.kind !== "event") continue;
      const e = item.event;
      if (e.revision < firstRevision) continue;
      const seen = start.kind === "after" && e.revision <= start.thread;
      if (seen && e.revision < start.thread) continue;
      if (!seen) {
        for (const out of threadEventOutputs(modes, threadId, e)) yield { id: threadStreamEventId(e.revision), ...out };
      }
      const runId = runEnqueuedBy(e);
      const run = runId && (await followRun(store, runId, e.revision, seen && start.kind === "after" ? start.run : undefined, modes, signal));
      if (run) for await (const batch of run) for (const out of batch) yield out;
      if (endsThreadStream(e)) break;
    }
  } finally {
    release();
    await subscription.close();
  }
}
