import type { RecordedEvent } from "../src/eventstore/types.js";
import { RUN_STREAM_PREFIX, type RunEnded } from "../src/domain/runs.js";
import type { RunRecord } from "../src/domain/run-record.js";
import {
  WEBHOOK_STREAM_PREFIX,
  deliveryOf,
  deliveryRunEnded,
  deliveryRunStarted,
  evolveDelivery,
  webhookEventSchemas,
  type Delivery,
  type WebhookEvent,
} from "../src/domain/webhooks.js";

const THREAD = "thread-";

/**
 * Webhook deliveries by run id, folded from three kinds of streams: the run record with its URL
 * (RunEnqueued on `thread-{id}`), when the run started and ended (RunClaimed, RunEnded on
 * `run-{id}`), and the attempts (`webhook-{run_id}`). Runs without a webhook never get an entity.
 * Pure: no clock, no I/O.
 */
export const webhookDeliveries = {
  name: "webhooks",
  streamPrefixes: [THREAD, RUN_STREAM_PREFIX, WEBHOOK_STREAM_PREFIX] as const,
  eventTypes: ["RunEnqueued", "RunClaimed", "RunEnded", ...Object.keys(webhookEventSchemas)],

  key(event: RecordedEvent): string | undefined {
    if (event.streamId.startsWith(THREAD)) return event.type === "RunEnqueued" ? (event.data as { run: RunRecord }).run.run_id : undefined;
    if (event.streamId.startsWith(RUN_STREAM_PREFIX)) return event.streamId.slice(RUN_STREAM_PREFIX.length);
    if (event.streamId.startsWith(WEBHOOK_STREAM_PREFIX)) return event.streamId.slice(WEBHOOK_STREAM_PREFIX.length);
    return undefined;
  },

  evolve(state: Delivery | undefined, event: RecordedEvent): Delivery | undefined {
    if (event.type === "RunEnqueued") return state ?? deliveryOf((event.data as { run: RunRecord }).run);
    if (!state) return undefined;
    switch (event.type) {
      case "RunClaimed":
        return deliveryRunStarted(state, (event.data as { claimed_at: string }).claimed_at);
      case "RunEnded":
        return deliveryRunEnded(state, event.data as RunEnded);
      default:
        if (!event.streamId.startsWith(WEBHOOK_STREAM_PREFIX)) return state;
        return evolveDelivery(state, { type: event.type, data: event.data } as WebhookEvent, event.revision);
    }
  },
};
