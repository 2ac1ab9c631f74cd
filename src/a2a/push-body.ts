/**
 * The body of an A2A push notification: the task as the run that ended left it, in the wire
 * version its config was set with (v0.3: the Task; v1.0: a StreamResponse `{task}`).
 */
import type { AppContext } from "../app/context.js";
import type { RunsService } from "../app/runs.js";
import { withValuesResolved } from "../eventstore/large-values.js";
import type { Delivery } from "../domain/webhooks.js";
import { taskOf } from "./task-view.js";
import { v03, v1 } from "./codec.js";

/** For the webhook dispatcher's `pushBody`; undefined when the run is gone (its thread was deleted). */
export function a2aPushBody(ctx: Pick<AppContext, "store">, runs: Pick<RunsService, "view">): (d: Delivery) => Promise<string | undefined> {
  return async (d) => {
    const view = runs.view(d.run_id);
    if (!view || !d.push) return undefined;
    const ended = d.ended && (await withValuesResolved(ctx.store, d.ended));
    const task = taskOf(view, ended, { taskId: d.push.task_id });
    return JSON.stringify((d.push.protocol === "1.0" ? v1 : v03).encodePushBody(task));
  };
}
