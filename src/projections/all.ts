import type { AnyProjection } from "../../projections/projection.js";
import { assistantsProjection } from "../../projections/assistants.js";
import { threadsProjection } from "../../projections/threads.js";
import { checkpointsProjection } from "../../projections/checkpoints.js";
import { runsProjection, threadRunsProjection } from "../../projections/runs.js";

/** Every read model the server keeps, fed by one `$all` subscription. */
export const allProjections: AnyProjection[] = [assistantsProjection, threadsProjection, checkpointsProjection, runsProjection, threadRunsProjection];
