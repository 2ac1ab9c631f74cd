import type { EventStore } from "../eventstore/types.js";
import { deliveryKey, webhookStream, type Delivery, type WebhookAttempted } from "../domain/webhooks.js";
import { isEvent } from "../domain/event-of.js";

/** Which A2A push an entry is about (absent for the run's own webhook). */
export interface PushOfEntry {
  a2a_push?: { task_id: string; config_id: string; url: string };
}

/** One entry of `GET /runs/{run_id}/webhooks`: an attempt, or the delivery's final outcome. */
export type WebhookAttemptView = (
  | ({ event: "attempt"; at: string } & WebhookAttempted)
  | { event: "delivered"; at: string; attempts: number }
  | { event: "failed"; at: string; attempts: number; reason: string }
) &
  PushOfEntry;

/**
 * The delivery log, read from the log itself (`webhook-{run_id}`), oldest first. Claims are left
 * out. Then the A2A push notifications of the run's end (`pushes`), each entry naming its config.
 */
export async function readWebhookAttempts(store: EventStore, runId: string, pushes: readonly Delivery[] = []): Promise<WebhookAttemptView[]> {
  const out = await readDeliveryLog(store, runId);
  for (const d of pushes) {
    if (!d.push) continue;
    const a2a_push = { task_id: d.push.task_id, config_id: d.push.config_id, url: d.url };
    for (const entry of await readDeliveryLog(store, deliveryKey(d))) out.push({ ...entry, a2a_push });
  }
  return out;
}

async function readDeliveryLog(store: EventStore, key: string): Promise<WebhookAttemptView[]> {
  const out: WebhookAttemptView[] = [];
  for (const e of await store.readStream(webhookStream(key))) {
    if (isEvent(e, "WebhookAttempted")) {
      const d = e.data;
      out.push({ event: "attempt", at: d.started_at, ...d });
    } else if (isEvent(e, "WebhookDelivered")) {
      const d = e.data;
      out.push({ event: "delivered", at: d.delivered_at, attempts: d.attempts });
    } else if (isEvent(e, "WebhookFailed")) {
      const d = e.data;
      out.push({ event: "failed", at: d.failed_at, attempts: d.attempts, reason: d.reason });
    }
  }
  return out;
}
