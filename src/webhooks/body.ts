import type { Delivery } from "../domain/webhooks.js";
import { runStatusOf } from "../domain/runs.js";
import type { JsonObject } from "../domain/json.js";

/**
 * The webhook body: the run as the API returns it, plus `run_started_at`, `run_ended_at`,
 * `webhook_sent_at`, `values` (the thread's final values, already in wire form when the run
 * ended) and, for failures, `error` `{error, message}`; then the `webhooks.allowed_fields` filter.
 */
export function webhookBody(d: Delivery, sentAt: string, allowedFields?: readonly string[]): JsonObject {
  const ended = d.ended;
  const status = ended ? (ended.status === "rollback" ? "interrupted" : ended.status) : runStatusOf({ revision: "no_stream", attempt: 0 });
  const body: JsonObject = {
    ...d.run,
    status,
    updated_at: ended?.ended_at ?? d.run?.updated_at ?? null,
    run_started_at: d.run_started_at,
    run_ended_at: ended?.ended_at ?? null,
    webhook_sent_at: sentAt,
    values: ended?.values ?? null,
  };
  if (ended?.error) body.error = ended.error;
  if (!allowedFields || allowedFields.length === 0) return body;
  const allowed = new Set(allowedFields);
  return Object.fromEntries(Object.entries(body).filter(([k]) => allowed.has(k)));
}
