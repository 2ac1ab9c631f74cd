import type { RecordedEvent } from "../src/eventstore/types.js";
import { evolveThread, type ThreadEvent, type ThreadState } from "../src/domain/threads.js";
import type { Projection } from "./projection.js";

const PREFIX = "thread-";

/** Threads by id with their status, values and active runs; deleted ones stay as tombstones. */
export const threadsProjection: Projection<ThreadState> = {
  name: "threads",
  streamPrefixes: [PREFIX],
  key: (event: RecordedEvent) => event.streamId.slice(PREFIX.length),
  evolve: (state, event) => evolveThread(state, { type: event.type, data: event.data } as ThreadEvent, event.revision),
};
