import { evolveThread, type ThreadEvent, type ThreadState } from "../src/domain/threads.js";
import { aggregateProjection } from "./projection.js";

/** Threads by id with their status, values and active runs; deleted ones stay as tombstones. */
export const threadsProjection = aggregateProjection<ThreadState, ThreadEvent>("threads", "thread-", evolveThread);
