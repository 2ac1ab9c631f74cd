/**
 * The run operations the edges call on behalf of a caller (run creation goes through
 * `RunsService.authorize`): each runs custom auth's `threads:<action>` handler and hides what its
 * filters exclude behind the same 404 an unknown run gets.
 */
import type { AppContext } from "./context.js";
import type { RunsService } from "./runs.js";
import { authorize, type Caller } from "./auth/caller.js";
import { authorizeThread, runVisible } from "./auth/guards.js";
import { notFound } from "../domain/errors.js";
import type { RunRecord, RunStatus } from "../domain/run-record.js";
import type { CancelAction } from "../domain/runs.js";
import type { AuthAction } from "./auth/engine.js";
import { threadsOfRuns } from "./runs.js";

export class RunsAccess {
  constructor(
    private readonly ctx: AppContext,
    private readonly runs: RunsService,
  ) {}

  async list(caller: Caller, threadId: string, q: { limit: number; offset: number; status?: RunStatus }): Promise<RunRecord[]> {
    const { filters } = await authorizeThread(this.ctx, caller, "search", threadId, { thread_id: threadId, status: q.status });
    return this.runs.list(threadId, q, filters);
  }

  /**
   * A run of a thread, for reading (get, join, stream): one of a thread the caller may not see is
   * not found, before anything is sent (the join-stream route turns that into the official server's
   * 200 stream of one `error` event).
   */
  async get(caller: Caller, threadId: string, runId: string): Promise<RunRecord> {
    await authorizeThread(this.ctx, caller, "read", threadId, { thread_id: threadId, run_id: runId });
    return this.runs.get(threadId, runId);
  }

  /** A run reached without its thread in the path: visible when its metadata (its thread's at creation) passes. */
  async getStateless(caller: Caller, runId: string): Promise<RunRecord> {
    const { filters } = await authorize(caller, "threads", "read", { run_id: runId });
    const run = await this.runs.get(null, runId);
    if (!(await runVisible(this.ctx, run, filters))) throw notFound("Run not found");
    return run;
  }

  async delete(caller: Caller, threadId: string, runId: string): Promise<void> {
    await authorizeThread(this.ctx, caller, "delete", threadId, { thread_id: threadId, run_id: runId });
    await this.runs.delete(threadId, runId);
  }

  /** Cancels a run of a thread; returns it as it was when asked. */
  async cancel(caller: Caller, threadId: string, runId: string, action: CancelAction): Promise<RunRecord> {
    await authorizeThread(this.ctx, caller, "update", threadId, { thread_id: threadId, run_id: runId, action });
    const run = await this.runs.get(threadId, runId);
    await this.runs.cancel(threadId, runId, action);
    return run;
  }

  /**
   * Which runs the caller may see for `threads:<action>` on `value` (the handler runs): undefined
   * when every run is visible, else a check of one run (its metadata and its thread's).
   */
  async visibility(caller: Caller, action: AuthAction<"threads">, value: Record<string, unknown>): Promise<((run: RunRecord) => Promise<boolean>) | undefined> {
    const { filters } = await authorize(caller, "threads", action, value);
    return filters && ((run) => runVisible(this.ctx, run, filters));
  }

  /** The SQL conditions limiting a search of runs to the caller's threads (`threads:search`); undefined: none. */
  async searchConditions(caller: Caller, value: Record<string, unknown>) {
    const { filters } = await authorize(caller, "threads", "search", value);
    return filters && threadsOfRuns(filters);
  }

  /** Cancels the named runs, or those of a thread or status; how many were cancelled. */
  async cancelMany(caller: Caller, q: Parameters<RunsService["cancelMany"]>[0], action: CancelAction): Promise<number> {
    const { filters } = await authorize(caller, "threads", "update", { ...q, action });
    if (filters) {
      // Named runs the user may not see are reported as missing, like unknown ones.
      for (const runId of q.run_ids ?? []) {
        const view = this.runs.view(runId);
        if (view && !(await runVisible(this.ctx, view.run, filters))) throw notFound("Run not found");
      }
    }
    return this.runs.cancelMany(q, action, filters);
  }
}
