/**
 * A thread's protocol events, read from the log: the runs the thread stream names (RunEnqueued, in
 * order), each announced at its enqueue (or at its first claim when it was queued behind the run
 * before it), then its `run-{id}` from its start until its RunEnded, then the next run, live for as
 * long as the reader wants. Nothing is held in memory beyond the run being read, so a client may
 * resume from any `since` at any time: while the run goes on, after it ended, after a restart.
 *
 * Without `since` the feed starts at the thread's latest run (the one a client that just called
 * `run.start`, or reloads mid-run, is after), or at an earlier one still going on when the latest
 * waits in the queue behind it; with `since` it replays every later event of every run.
 */
import type { EventStore, RecordedEvent } from "../eventstore/types.js";
import { isLargeValueMarker } from "../eventstore/large-values.js";
import { threadStream } from "../domain/threads.js";
import { runStream } from "../domain/runs.js";
import { chunkOf, SKIP, tailRunMapped } from "../runtime/run-tail.js";
import { readRunEnd } from "../runtime/run-completion.js";
import type { RunRecord } from "../domain/run-record.js";
import { isEvent } from "../domain/event-of.js";
import {
  EVENTS_PER_LOG_EVENT,
  matchesFilter,
  newRunMapState,
  protocolEventsOf,
  runStartOf,
  seqOf,
  type EventFilter,
  type ProtocolEvent,
  type RunMapState,
} from "./log-events.js";

interface RunRef {
  runId: string;
  graphName: string;
  /** Where the thread's stream accepted the run (its RunEnqueued). */
  enqueued: { position: bigint; created: Date };
}

const graphNameOf = (run: RunRecord): string => {
  const graphId = (run.kwargs.config as { configurable?: { graph_id?: unknown } } | undefined)?.configurable?.graph_id;
  return typeof graphId === "string" ? graphId : run.assistant_id;
};

/** A thread's runs in its current incarnation, and whether that incarnation was deleted. */
interface RunListState {
  readonly runs: RunRef[];
  deleted: boolean;
}

/**
 * One event of the thread stream applied to its run list; says whether it changed it. A deleted
 * thread's id may be created again: a creation starts the list anew (the runs before it were another
 * thread's), and a deletion ends the list only if no creation follows it.
 */
function applyToRunList(list: RunListState, event: RecordedEvent): boolean {
  if (isEvent(event, "RunEnqueued")) {
    const run = event.data.run;
    list.runs.push({ runId: run.run_id, graphName: graphNameOf(run), enqueued: { position: event.position, created: event.created } });
  } else if (event.type === "ThreadCreated") {
    list.deleted = false;
    list.runs.length = 0;
  } else if (event.type === "ThreadDeleted") {
    list.deleted = true;
  } else return false;
  return true;
}

/** The thread's runs as the thread stream names them, live; `caughtUp` once the history is in. */
class RunList {
  private readonly state: RunListState = { runs: [], deleted: false };
  caughtUp = false;
  ended = false;
  private wake: (() => void) | undefined;
  private readonly subscription;
  readonly done: Promise<void>;

  constructor(store: EventStore, threadId: string) {
    this.subscription = store.subscribeToStream(threadStream(threadId), { fromRevision: "start" });
    this.done = this.pump();
  }

  get runs(): readonly RunRef[] {
    return this.state.runs;
  }

  private async pump(): Promise<void> {
    try {
      for await (const item of this.subscription) {
        if (item.kind === "caughtUp") {
          this.caughtUp = true;
          if (this.state.deleted) break;
        } else if (!applyToRunList(this.state, item.event)) continue;
        else if (this.state.deleted && this.caughtUp) break;
        this.notify();
      }
    } catch {
      // A subscription that fails ends the feed; the client reconnects with `since`.
    } finally {
      this.ended = true;
      this.notify();
    }
  }

  notify(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  /** Resolves at the next change (a run, the history's end, the end of the thread or of the reader). */
  changed(): Promise<void> {
    return new Promise((resolve) => (this.wake = resolve));
  }

  async close(): Promise<void> {
    await this.subscription.close();
    await this.done;
  }
}

/** How many runs back from the latest a feed without `since` looks for one still going on. */
const UNENDED_SEARCH = 16;

/** Whether every event of a run is at or before `since` (it ended before): then it need not be read. */
async function endedBefore(store: EventStore, runId: string, since: number): Promise<boolean> {
  const ended = await readRunEnd(store, runId);
  return ended !== undefined && seqOf(ended.position, EVENTS_PER_LOG_EVENT - 1) <= since;
}

/** Where a feed without `since` starts: the latest run, or the first of the runs before it that have not ended (it is queued behind them). */
async function liveStart(store: EventStore, runs: readonly RunRef[]): Promise<number> {
  let index = Math.max(0, runs.length - 1);
  while (index > 0 && runs.length - index < UNENDED_SEARCH && !(await readRunEnd(store, runs[index - 1]!.runId))) index--;
  return index;
}

/**
 * A run's start is announced at its enqueue when the run before it on the thread (if any) had ended
 * by then: every event of that run is then earlier in the log. A run queued behind another announces
 * its start at its first claim, which follows the other's end.
 */
async function startsAtEnqueue(store: EventStore, runs: readonly RunRef[], index: number): Promise<boolean> {
  if (index === 0) return true;
  const previousEnd = await readRunEnd(store, runs[index - 1]!.runId);
  return previousEnd !== undefined && previousEnd.position < runs[index]!.enqueued.position;
}

/** The mapping state of the `index`th run, with its start announced at its enqueue when it is (see startsAtEnqueue). */
async function runMapStart(store: EventStore, runs: readonly RunRef[], index: number): Promise<{ state: RunMapState; start?: ProtocolEvent }> {
  const run = runs[index]!;
  const state = newRunMapState(run.graphName);
  if (!(await startsAtEnqueue(store, runs, index))) return { state };
  return { state, start: runStartOf(state, run.enqueued) };
}

/**
 * One recorded event of a run → its protocol events, a chunk written beside the run (see RunStreamWriter) read back
 * first. Synchronous for every other event (a run's tokens): no promise per event where nothing is read.
 */
function protocolEventsOfRecorded(store: EventStore, state: RunMapState, recorded: RecordedEvent): ProtocolEvent[] | Promise<ProtocolEvent[]> {
  const output = isEvent(recorded, "RunOutput") ? recorded.data : undefined;
  if (!output || !isLargeValueMarker(output.data)) return protocolEventsOf(state, recorded);
  return chunkOf(store, output).then((data) => protocolEventsOf(state, { ...recorded, data: { ...output, data } }));
}

/**
 * The `index`th run's protocol events after `since`, until its end (or the reader's), those of one log event at a
 * time (a tail that maps as it reads: no generator layer per token); undefined when the run ended before `since`.
 */
async function runEventBatches(
  store: EventStore,
  runs: readonly RunRef[],
  index: number,
  since: number | undefined,
  signal: AbortSignal,
): Promise<AsyncIterableIterator<ProtocolEvent[]> | undefined> {
  const run = runs[index]!;
  if (since !== undefined && (await endedBefore(store, run.runId, since))) return undefined;
  const { state, start } = await runMapStart(store, runs, index);
  const after = (events: ProtocolEvent[]): ProtocolEvent[] | typeof SKIP => {
    const kept = since === undefined ? events : events.filter((event) => event.seq > since);
    return kept.length > 0 ? kept : SKIP;
  };
  const map = (recorded: RecordedEvent) => {
    const mapped = protocolEventsOfRecorded(store, state, recorded);
    return Array.isArray(mapped) ? after(mapped) : mapped.then(after);
  };
  const first = start && (since === undefined || start.seq > since) ? [start] : undefined;
  return tailRunMapped(store, run.runId, "start", signal, { map, first });
}

/**
 * Hands the protocol events of a thread's runs to `onEvent`, in order, after `since` (see the module comment);
 * settles when `signal` aborts or the thread is deleted, and rejects with what `onEvent` threw. `fromRun`: without
 * `since`, start at this run (where a count of what the feed replays was made) rather than at the live start as it
 * is now.
 */
export async function feedThread(
  store: EventStore,
  threadId: string,
  since: number | undefined,
  signal: AbortSignal,
  /** Each event in order; a promise it returns is awaited before the next (a slow client slows its own feed). */
  onEvent: (event: ProtocolEvent) => void | Promise<void>,
  fromRun?: string,
): Promise<void> {
  const list = new RunList(store, threadId);
  const stop = () => list.notify();
  signal.addEventListener("abort", stop, { once: true });
  try {
    while (!list.caughtUp && !list.ended && !signal.aborted) await list.changed();
    const named = fromRun === undefined ? -1 : list.runs.findIndex((r) => r.runId === fromRun);
    let next = since !== undefined ? 0 : named >= 0 ? named : await liveStart(store, list.runs);
    while (!signal.aborted) {
      if (next < list.runs.length) {
        const batches = await runEventBatches(store, list.runs, next++, since, signal);
        if (!batches) continue;
        // A callback, not a generator: a token costs its reader no promise beyond the tail's.
        for await (const batch of batches) {
          for (const event of batch) {
            if (signal.aborted) break;
            const handled = onEvent(event);
            if (handled) await handled;
          }
        }
        continue;
      }
      if (list.ended) return;
      await list.changed();
    }
  } finally {
    signal.removeEventListener("abort", stop);
    await list.close();
  }
}

/** The runs of a thread's current incarnation, read once (none when its last incarnation was deleted). */
async function runsOf(store: EventStore, threadId: string): Promise<RunRef[]> {
  const list: RunListState = { runs: [], deleted: false };
  for (const event of await store.readStream(threadStream(threadId))) applyToRunList(list, event);
  return list.deleted ? [] : list.runs;
}

/**
 * How many events a feed with `filter` started now replays: those already in the log, at or before
 * `throughSeq` (the log's head when the subscription was made), that the filter lets through; and the
 * run the count started at, for the feed to start there too (`threadFeed`'s `fromRun`).
 */
export async function replayedEventCount(
  store: EventStore,
  threadId: string,
  filter: EventFilter,
  throughSeq: number,
): Promise<{ count: number; fromRun: string | undefined }> {
  const runs = await runsOf(store, threadId);
  const since = filter.since;
  let count = 0;
  const start = since === undefined ? await liveStart(store, runs) : 0;
  for (let index = start; index < runs.length; index++) {
    const run = runs[index]!;
    if (since !== undefined && (await endedBefore(store, run.runId, since))) continue;
    const counts = (event: ProtocolEvent) => event.seq <= throughSeq && (since === undefined || event.seq > since) && matchesFilter(filter, event);
    const { state, start } = await runMapStart(store, runs, index);
    if (start && counts(start)) count++;
    for (const recorded of await store.readStream(runStream(run.runId))) {
      for (const event of await protocolEventsOfRecorded(store, state, recorded)) if (counts(event)) count++;
      if (recorded.type === "RunEnded") break;
    }
  }
  // The feed starts at the same run, whatever has been enqueued since.
  return { count, fromRun: since === undefined ? runs[start]?.runId : undefined };
}
