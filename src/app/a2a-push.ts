/**
 * The A2A push-notification configs of a task: the application core's commands for them, so that the
 * A2A edge writes nothing to the log itself. Last writer wins per config, as in a2a-js.
 */
import type { AppContext } from "./context.js";
import { a2aPushStream, type PushConfig } from "../domain/a2a-push.js";
import type { RunEnded } from "../domain/runs.js";

/** Sets (or replaces, same id) a config of a task whose run is `runId` now; read-your-writes: a get right after sees it. */
export async function setPushConfig(ctx: AppContext, set: { taskId: string; runId: string; config: PushConfig; protocol: "0.3" | "1.0" }): Promise<void> {
  await ctx.commands.append({
    stream: a2aPushStream(set.taskId),
    events: [{ type: "A2APushConfigSet", data: { task_id: set.taskId, run_id: set.runId, protocol: set.protocol, config: set.config, set_at: ctx.now() } }],
    expected: "any",
    waitFor: "fold",
  });
}

/** The run a config was set for had ended before the config reached the log: that end is notified all the same. */
export async function catchUpPushRunEnd(ctx: AppContext, caught: { taskId: string; runId: string; configId: string; ended: RunEnded }): Promise<void> {
  await ctx.commands.append({
    stream: a2aPushStream(caught.taskId),
    events: [{ type: "A2APushRunEndCaughtUp", data: { task_id: caught.taskId, run_id: caught.runId, config_id: caught.configId, ended: caught.ended } }],
    expected: "any",
  });
}

export async function deletePushConfig(ctx: AppContext, taskId: string, configId: string): Promise<void> {
  await ctx.commands.append({
    stream: a2aPushStream(taskId),
    events: [{ type: "A2APushConfigDeleted", data: { task_id: taskId, config_id: configId, deleted_at: ctx.now() } }],
    expected: "any",
    waitFor: "fold",
  });
}
