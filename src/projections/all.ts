import type { AnyProjection } from "../../projections/projection.js";
import { assistantsProjection } from "../../projections/assistants.js";
import { threadsProjection } from "../../projections/threads.js";
import { runsProjection, threadRunsProjection } from "../../projections/runs.js";

/**
 * Every read model the server keeps for all entities, fed by one `$all` subscription. Checkpoints
 * are not among them: they grow with every run, so the checkpointer folds one thread's stream on
 * demand and keeps only recently used threads (src/runtime/checkpoint-cache.ts).
 */
export const allProjections: AnyProjection[] = [assistantsProjection, threadsProjection, runsProjection, threadRunsProjection];
