import type { EventStore } from "../eventstore/types.js";
import { webhookStream, type WebhookAttempted } from "../domain/webhooks.js";

/** One entry of `GET /runs/{run_id}/webhooks`: an attempt, or the delivery's final outcome. */
export type WebhookAttemptView =
  | ({ event: "attempt"; at: string } & WebhookAttempted)
  | { event: "delivered"; at: string; attempts: number }
  | { event: "failed"; at: string; attempts: number; reason: string };

/** The delivery log, read from the log itself (`webhook-{run_id}`), oldest first. Claims are left out. */
export async function readWebhookAttempts(store: EventStore, runId: string): Promise<WebhookAttemptView[]> {
  const out: WebhookAttemptView[] = [];
  for (const e of await store.readStream(webhookStream(runId))) {
    if (e.type === "WebhookAttempted") {
      const d = e.data as WebhookAttempted;
      out.push({ event: "attempt", at: d.started_at, ...d });
    } else if (e.type === "WebhookDelivered") {
      const d = e.data as { attempts: number; delivered_at: string };
      out.push({ event: "delivered", at: d.delivered_at, attempts: d.attempts });
    } else if (e.type === "WebhookFailed") {
      const d = e.data as { attempts: number; reason: string; failed_at: string };
      out.push({ event: "failed", at: d.failed_at, attempts: d.attempts, reason: d.reason });
    }
  }
  return out;
}
