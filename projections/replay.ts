import type { RecordedEvent } from "../src/eventstore/types.js";
import { PURGED_EVENT_TYPE } from "../src/eventstore/types.js";
import { publicRun, type RunView } from "../src/domain/runs.js";
import type { RunRecord } from "../src/domain/run-record.js";
import type { ThreadState } from "../src/domain/threads.js";
import { applyEvent } from "./projection.js";
import { threadsProjection } from "./threads.js";
import { runsProjection } from "./runs.js";

/**
 * A thread as it was at one point of the log, folded from its own events (thread, checkpoint and
 * run streams) with the same pure folds as the read models, never read from them.
 */
export interface ThreadAt {
  /** Position of the last event folded (-1 when none), and its time. */
  position: bigint;
  time: string | null;
  /** Undefined before the thread was created. */
  thread: ThreadState | undefined;
  /** Its runs as the API shows them, oldest first. */
  runs: RunRecord[];
}

/** A point of the log: a position (inclusive) or an instant (every event recorded at or before it). */
export type LogPoint = { position: bigint } | { time: Date };

const reaches = (event: RecordedEvent, at: LogPoint) => ("position" in at ? event.position <= at.position : event.created.getTime() <= at.time.getTime());

/**
 * Folds the thread's events (in log order) up to `at`. Tombstones of a purge and output chunks are
 * skipped: a purged thread replays as what its ThreadPurged event leaves (a deleted, empty thread).
 */
export function replayThread(threadId: string, events: readonly RecordedEvent[], at: LogPoint): ThreadAt {
  const models = new Map<string, Map<string, unknown>>();
  let last: RecordedEvent | undefined;
  for (const event of events) {
    if (!reaches(event, at)) break;
    last = event;
    if (event.type === PURGED_EVENT_TYPE || event.type === "RunOutput") continue;
    // The run views of other threads never appear here: only this thread's streams are given.
    applyEvent([threadsProjection, runsProjection], models, event);
  }
  const thread = models.get("threads")?.get(threadId) as ThreadState | undefined;
  const runs = [...((models.get("runs") ?? new Map()) as Map<string, RunView>).values()]
    .map(publicRun)
    .sort((a, b) => (a.run_id < b.run_id ? -1 : a.run_id > b.run_id ? 1 : 0));
  return { position: last?.position ?? -1n, time: last ? last.created.toISOString() : null, thread, runs };
}

/** Parses `at` as the API and the CLI take it: a log position (digits) or an ISO 8601 time. */
export function parseLogPoint(text: string): LogPoint | undefined {
  if (/^\d{1,19}$/.test(text)) return { position: BigInt(text) };
  if (!/^\d{4}-\d{2}-\d{2}(T[\d:.]+(Z|[+-]\d{2}:?\d{2})?)?$/.test(text)) return undefined;
  const ms = Date.parse(text);
  return Number.isNaN(ms) ? undefined : { time: new Date(ms) };
}
