import type { RecordedEvent } from "../src/eventstore/types.js";
import { RUN_STREAM_PREFIX, evolveRunStream, runViewOf, type RunStreamEvent, type RunView } from "../src/domain/runs.js";
import type { RunRecord } from "../src/domain/run-record.js";
import type { Projection } from "./projection.js";

const THREAD = "thread-";

/**
 * Runs by id: the record from RunEnqueued (thread streams), its progress from its own `run-{id}`
 * stream. A run rolled back or deleted disappears. RunOutput chunks only move the stream revision.
 */
export const runsProjection: Projection<RunView> = {
  name: "runs",
  streamPrefixes: [THREAD, RUN_STREAM_PREFIX],
  key(event: RecordedEvent) {
    if (event.streamId.startsWith(RUN_STREAM_PREFIX)) return event.streamId.slice(RUN_STREAM_PREFIX.length);
    switch (event.type) {
      case "RunEnqueued":
        return (event.data as { run: RunRecord }).run.run_id;
      case "RunFinished":
      case "RunDeleted":
        return (event.data as { run_id: string }).run_id;
      default:
        return undefined;
    }
  },
  evolve(state, event) {
    if (event.streamId.startsWith(RUN_STREAM_PREFIX)) {
      if (!state) return undefined;
      return { ...state, stream: evolveRunStream(state.stream, { type: event.type, data: event.data } as RunStreamEvent, event.revision) };
    }
    switch (event.type) {
      case "RunEnqueued":
        return runViewOf((event.data as { run: RunRecord }).run);
      case "RunFinished":
        if (!state) return undefined;
        return (event.data as { status: string }).status === "rollback" ? undefined : { ...state, threadFinished: true };
      case "RunDeleted":
        return undefined;
      default:
        return state;
    }
  },
};

/** Run ids per thread, oldest first (for listing a thread's runs). */
export const threadRunsProjection: Projection<string[]> = {
  name: "thread-runs",
  streamPrefixes: [THREAD],
  key: (event) => (event.type === "RunEnqueued" || event.type === "RunFinished" || event.type === "RunDeleted" || event.type === "ThreadDeleted" ? event.streamId.slice(THREAD.length) : undefined),
  evolve(state, event) {
    switch (event.type) {
      case "RunEnqueued":
        return [...(state ?? []), (event.data as { run: RunRecord }).run.run_id];
      case "RunFinished": {
        const d = event.data as { run_id: string; status: string };
        return d.status === "rollback" ? state?.filter((id) => id !== d.run_id) : state;
      }
      case "RunDeleted": {
        const d = event.data as { run_id: string };
        return state?.filter((id) => id !== d.run_id);
      }
      case "ThreadDeleted":
        return undefined;
      default:
        return state;
    }
  },
};
