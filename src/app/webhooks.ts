import type { AppContext } from "./context.js";
import { invalid, notFound } from "../domain/errors.js";
import { filterMatches } from "../read-models/auth-filters.js";
import { checkWebhookUrl } from "../webhooks/url-policy.js";
import { webhookUrlPolicyFor } from "../webhooks/mode-policy.js";
import { readWebhookAttempts, type WebhookAttemptView } from "../webhooks/attempts.js";
import { authorize, type Caller } from "./auth/caller.js";
import { authorizeThread } from "./auth/guards.js";

/**
 * A run's (or cron's) `webhook` checked against the URL policy when it is created: 422 with the
 * official message. With webhooks disabled the URL is accepted as is and never used.
 */
export function assertWebhookAllowed(ctx: Pick<AppContext, "langgraph" | "config">, url: string | undefined): void {
  if (url === undefined || ctx.langgraph.config.http.disable_webhooks) return;
  const check = checkWebhookUrl(url, webhookUrlPolicyFor(ctx.langgraph.config.webhooks.url, ctx.config.devMode));
  if (!check.ok) throw invalid(check.detail);
}

/**
 * The delivery log of one run's webhook and A2A pushes, from `webhook-{key}` streams (404 when the
 * run is unknown): reading it is reading the run (`threads:read`).
 */
export async function webhookAttempts(ctx: AppContext, caller: Caller, threadId: string | null, id: string): Promise<WebhookAttemptView[]> {
  const { filters } =
    threadId === null
      ? await authorize(caller, "threads", "read", { run_id: id })
      : await authorizeThread(ctx, caller, "read", threadId, { thread_id: threadId, run_id: id });
  // Deliveries outlive their run's row (a stateless run's thread is deleted when it ends).
  const run = ctx.readModels.webhooks.get(id)?.run ?? ctx.readModels.runs.load(id)?.run;
  if (!run || (threadId !== null && run.thread_id !== threadId)) throw notFound("Run not found");
  // Custom auth: a run whose metadata (its thread's at creation) the user may not see is not found.
  if (filters && !filterMatches(run.metadata, filters)) throw notFound("Run not found");
  return readWebhookAttempts(ctx.store, id, ctx.readModels.webhooks.pushesOfRun(id));
}
