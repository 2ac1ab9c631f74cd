import { A2A_PUSH_STREAM_PREFIX } from "./a2a-push.js";
import { CHECKPOINT_STREAM_PREFIX } from "./checkpoint-events.js";
import { RUN_SIDE_STREAM_PREFIXES, RUN_STREAM_PREFIX } from "./runs.js";
import { THREAD_STREAM_PREFIX, THREAD_VALUES_STREAM_PREFIX } from "./threads.js";
import { WEBHOOK_STREAM_PREFIX } from "./webhooks.js";

/**
 * The stream categories a thread's purge removes that are named by an id alone: the thread's, or one of its runs'.
 * The purge builds their names from the ids (src/app/thread-history.ts); the read models' filter for purged content
 * on EventStoreDB reads the ids back from the names (src/read-models/purged-content.ts). Both take these lists, so a
 * new side stream is added here once. What a purge finds otherwise (the thread's own large checkpoint values, the
 * deliveries of its A2A push configs, its crons) is named by what the thread's events hold.
 */

/** `{prefix}{thread_id}`: the thread, its checkpoints, its state updates too large for one event. */
export const THREAD_ID_STREAM_PREFIXES = [THREAD_STREAM_PREFIX, CHECKPOINT_STREAM_PREFIX, THREAD_VALUES_STREAM_PREFIX] as const;

/**
 * `{prefix}{run_id}`: the run, its large input, command, outputs and final values, its webhook attempts (they name
 * the URL), the A2A push configs of the task it is (a task's id is its run's).
 */
export const RUN_ID_STREAM_PREFIXES = [RUN_STREAM_PREFIX, ...RUN_SIDE_STREAM_PREFIXES, WEBHOOK_STREAM_PREFIX, A2A_PUSH_STREAM_PREFIX] as const;
