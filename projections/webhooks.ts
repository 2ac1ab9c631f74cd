import type { RecordedEvent } from "../src/eventstore/types.js";
import { RUN_STREAM_PREFIX, type RunEnded } from "../src/domain/runs.js";
import { isEvent } from "../src/domain/event-of.js";
import {
  WEBHOOK_STREAM_PREFIX,
  deliveryOf,
  deliveryRunEnded,
  deliveryRunStarted,
  evolveDelivery,
  pushDeliveryOf,
  webhookEventSchemas,
  type Delivery,
  type WebhookEvent,
} from "../src/domain/webhooks.js";
import { A2A_PUSH_STREAM_PREFIX, TASK_ID_KEY, a2aPushEventSchemas, type StoredPushConfig } from "../src/domain/a2a-push.js";

const THREAD = "thread-";

/**
 * Webhook deliveries by key (a run's webhook: the run id), folded from three kinds of streams:
 * the run record with its URL (RunEnqueued on `thread-{id}`), when the run started and ended
 * (RunClaimed, RunEnded on `run-{id}`), and the attempts (`webhook-{key}`). Runs without a webhook
 * never get an entity. A2A push notifications (`a2a-push-{task_id}`, see `a2aPush`) add one
 * delivery per config when a run of the task ends. Pure: no clock, no I/O.
 */
export const webhookDeliveries = {
  name: "webhooks",
  streamPrefixes: [THREAD, RUN_STREAM_PREFIX, WEBHOOK_STREAM_PREFIX, A2A_PUSH_STREAM_PREFIX] as const,
  eventTypes: ["RunEnqueued", "RunClaimed", "RunEnded", ...Object.keys(webhookEventSchemas), ...Object.keys(a2aPushEventSchemas)],

  key(event: RecordedEvent): string | undefined {
    if (event.streamId.startsWith(THREAD)) return isEvent(event, "RunEnqueued") ? event.data.run.run_id : undefined;
    if (event.streamId.startsWith(RUN_STREAM_PREFIX)) return event.streamId.slice(RUN_STREAM_PREFIX.length);
    if (event.streamId.startsWith(WEBHOOK_STREAM_PREFIX)) return event.streamId.slice(WEBHOOK_STREAM_PREFIX.length);
    return undefined;
  },

  evolve(state: Delivery | undefined, event: RecordedEvent): Delivery | undefined {
    if (isEvent(event, "RunEnqueued")) return state ?? deliveryOf(event.data.run);
    if (!state) return undefined;
    if (isEvent(event, "RunClaimed")) return deliveryRunStarted(state, event.data.claimed_at);
    if (isEvent(event, "RunEnded")) return deliveryRunEnded(state, event.data);
    if (!event.streamId.startsWith(WEBHOOK_STREAM_PREFIX)) return state;
    return evolveDelivery(state, { type: event.type, data: event.data } as WebhookEvent, event.revision);
  },
};

/**
 * A2A push: which runs belong to a task with configs, and the deliveries a run's end makes.
 * A run is linked to its task when a config is set while it holds the task (the event names it)
 * or when it is enqueued to continue a task already linked (TASK_ID_KEY in its metadata); when a
 * linked run ends, each config the task has then gets one delivery.
 */
export const a2aPush = {
  /** The task a newly enqueued run continues, if any (linked only if that task has push links). */
  continuedTask(event: RecordedEvent): { run_id: string; task_id: string } | undefined {
    if (!isEvent(event, "RunEnqueued")) return undefined;
    const run = event.data.run;
    const task = run.metadata[TASK_ID_KEY];
    return typeof task === "string" ? { run_id: run.run_id, task_id: task } : undefined;
  },
  /** The deliveries of a linked run's end, one per config of its task. */
  deliveriesOnEnd(runId: string, taskId: string, configs: readonly StoredPushConfig[], ended: RunEnded): Delivery[] {
    return configs.map((c) => pushDeliveryOf(runId, c, taskId, ended));
  },
};
