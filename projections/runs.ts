import type { RecordedEvent } from "../src/eventstore/types.js";
import { RUN_STREAM_PREFIX, evolveRunStream, runViewOf, type RunEnded, type RunStreamEvent, type RunView } from "../src/domain/runs.js";
import { isEvent } from "../src/domain/event-of.js";
import type { Projection } from "./projection.js";

const THREAD = "thread-";

/**
 * The read model keeps a run's status and revisions, not its results: the terminal event's values
 * and interrupts (the thread's whole final state) stay in `run-{id}`, where /wait and /join read them.
 */
function slim(ended: RunEnded | undefined): RunEnded | undefined {
  if (!ended) return undefined;
  const { values: _values, interrupts: _interrupts, ...rest } = ended;
  return rest;
}

/**
 * Runs by id: the record from RunEnqueued (thread streams), its progress from its own `run-{id}`
 * stream. A run rolled back or deleted disappears; so do the runs of a deleted thread (handled by
 * the table adapter, as it removes many at once). RunOutput chunks are not folded, so `revision`
 * counts only the other events: it is exact while the run is unclaimed, the only time it serves as
 * an expected revision.
 */
export const runsProjection: Projection<RunView> = {
  name: "runs",
  streamPrefixes: [THREAD, RUN_STREAM_PREFIX],
  key(event: RecordedEvent) {
    if (event.streamId.startsWith(RUN_STREAM_PREFIX)) return event.type === "RunOutput" ? undefined : event.streamId.slice(RUN_STREAM_PREFIX.length);
    if (isEvent(event, "RunEnqueued")) return event.data.run.run_id;
    if (isEvent(event, "RunFinished") || isEvent(event, "RunDeleted")) return event.data.run_id;
    return undefined;
  },
  evolve(state, event) {
    if (event.streamId.startsWith(RUN_STREAM_PREFIX)) {
      if (!state) return undefined;
      const stream = evolveRunStream(state.stream, { type: event.type, data: event.data } as RunStreamEvent, event.revision);
      return { ...state, stream: stream.ended ? { ...stream, ended: slim(stream.ended) } : stream };
    }
    if (isEvent(event, "RunEnqueued")) return runViewOf(event.data.run);
    if (isEvent(event, "RunFinished")) {
      if (!state) return undefined;
      return event.data.status === "rollback" ? undefined : { ...state, threadFinished: true };
    }
    if (event.type === "RunDeleted") return undefined;
    return state;
  },
};
