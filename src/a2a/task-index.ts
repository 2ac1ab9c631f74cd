/**
 * Which runs are tasks of a context or of an assistant, newest first. The one place the A2A layer
 * lists runs: today through RunsService.list and the runs read model; when the read models move
 * to SQL, only this adapter changes (an index on (assistant_id, created_at) answers it).
 */
import type { AppContext } from "../app/context.js";
import type { RunsService } from "../app/runs.js";
import { runsProjection } from "../../projections/runs.js";
import { publicRun } from "../domain/runs.js";
import type { RunRecord } from "../domain/run-record.js";
import { HttpError } from "../http/errors.js";

export interface TaskIndex {
  runsOf(q: { assistantId: string; contextId?: string }): RunRecord[];
}

/** Most runs a listing looks at. */
const MAX_RUNS = 10_000;

export function readModelTaskIndex(ctx: AppContext, runs: RunsService): TaskIndex {
  return {
    runsOf(q) {
      let records: RunRecord[];
      if (q.contextId) {
        try {
          records = runs.list(q.contextId, { limit: MAX_RUNS, offset: 0 });
        } catch (error) {
          if (error instanceof HttpError && error.statusCode === 404) return [];
          throw error;
        }
      } else {
        records = ctx.runner
          .values(runsProjection)
          .filter((v) => v.run.assistant_id === q.assistantId)
          .map(publicRun)
          // run ids are UUIDv7: time-ordered
          .sort((a, b) => (a.run_id < b.run_id ? 1 : a.run_id > b.run_id ? -1 : 0))
          .slice(0, MAX_RUNS);
      }
      return records.filter((r) => r.assistant_id === q.assistantId);
    },
  };
}
