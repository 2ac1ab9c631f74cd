/**
 * Which runs are tasks, newest first: SQL on the runs read model (`runs_assistant`, `runs_thread`).
 * A task is the run that started it; the runs that resumed it after an interrupt carry its id in
 * their metadata (TASK_ID_KEY) and are found through it, never listed as tasks of their own.
 */
import type { AppContext } from "../app/context.js";
import type { RunRecord } from "../domain/run-record.js";
import type { SqlFragment } from "../read-models/json-filter.js";

import { TASK_ID_KEY } from "../domain/a2a-push.js";

export { TASK_ID_KEY };

export interface TaskScope {
  assistantId: string;
  /** One context (thread) only. */
  contextId?: string;
  /** More conditions on the runs (custom auth: the runs of the threads the user may see). */
  extra?: SqlFragment[];
}

export interface TaskIndex {
  /** The runs that started tasks, newest first. */
  tasks(scope: TaskScope, page: { limit: number; offset: number }): RunRecord[];
  countTasks(scope: TaskScope): number;
  /** The newest run that resumed the task, if any. */
  latestContinuation(scope: { assistantId: string; contextId: string }, taskId: string): RunRecord | undefined;
}

const continuation = `json_extract(runs.record, '$.metadata.${TASK_ID_KEY}')`;
const FIRST_RUNS: SqlFragment[] = [{ sql: `${continuation} IS NULL`, params: [] }];

export function readModelTaskIndex(ctx: AppContext): TaskIndex {
  const runs = ctx.readModels.runs;
  const query = (scope: TaskScope) => ({ threadId: scope.contextId });
  const firstRuns = (scope: TaskScope) => [...FIRST_RUNS, ...(scope.extra ?? [])];
  return {
    tasks: (scope, page) => runs.listByAssistant(scope.assistantId, { ...query(scope), ...page, extra: firstRuns(scope) }),
    countTasks: (scope) => runs.countByAssistant(scope.assistantId, { ...query(scope), extra: firstRuns(scope) }),
    latestContinuation: (scope, taskId) =>
      runs.listByAssistant(scope.assistantId, { ...query(scope), limit: 1, offset: 0, extra: [{ sql: `${continuation} = ?`, params: [taskId] }] })[0],
  };
}
