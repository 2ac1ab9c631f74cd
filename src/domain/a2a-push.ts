import * as z from "zod";
import type { EventsOf } from "./event-types.js";
import { runEventSchemas } from "./runs.js";

/**
 * A2A push notification configs: events on `a2a-push-{task_id}` (a task id is the id of the run
 * that started it). A config says where to POST when the task reaches a state the spec notifies
 * about; the deliveries themselves are webhook deliveries (see projections/webhooks.ts).
 */
/** Run metadata key of the runs that continue a task after an interrupt (the task keeps its first run's id). */
export const TASK_ID_KEY = "a2a_task_id";

export const A2A_PUSH_STREAM_PREFIX = "a2a-push-";
export const a2aPushStream = (taskId: string) => `${A2A_PUSH_STREAM_PREFIX}${taskId}`;

/** The protocol-neutral config (v0.3 `PushNotificationConfig`; v1.0 names `scheme` as one of `schemes`). */
export const PushConfigSchema = z.object({
  id: z.string().min(1),
  url: z.string().min(1),
  token: z.string().optional(),
  authentication: z.object({ schemes: z.array(z.string()), credentials: z.string().optional() }).optional(),
});
export type PushConfig = z.infer<typeof PushConfigSchema>;

export const a2aPushEventSchemas = {
  /**
   * A config set (or replaced, same id) on a task. `run_id` is the task's run at that moment: the
   * fold links it to the task, so its end is notified even when no later run continues the task.
   * `protocol` is the version the config was set with: it shapes the POSTed body.
   */
  A2APushConfigSet: z.object({
    task_id: z.string(),
    run_id: z.string(),
    protocol: z.enum(["0.3", "1.0"]),
    config: PushConfigSchema,
    set_at: z.string(),
  }),
  A2APushConfigDeleted: z.object({ task_id: z.string(), config_id: z.string(), deleted_at: z.string() }),
  /**
   * The run a config was set for had ended just before the config reached the log (the set saw
   * it running): that end is notified all the same, as if the config had come first.
   */
  A2APushRunEndCaughtUp: z.object({ task_id: z.string(), run_id: z.string(), config_id: z.string(), ended: runEventSchemas.RunEnded }),
} satisfies Record<string, z.ZodType>;

export type A2APushEvent = EventsOf<typeof a2aPushEventSchemas>;
export type A2APushConfigSet = z.infer<typeof a2aPushEventSchemas.A2APushConfigSet>;

/** A stored config with the protocol version that shapes its body. */
export interface StoredPushConfig extends PushConfig {
  protocol: "0.3" | "1.0";
}

/** What a push delivery adds to a webhook delivery: where and how to POST, and the task. */
export interface PushTarget {
  task_id: string;
  config_id: string;
  protocol: "0.3" | "1.0";
  token?: string;
  authentication?: PushConfig["authentication"];
}

/** How every push delivery's key starts: its `webhook-` stream is `webhook-a2a-{run_id}-{config_id}`. */
export const PUSH_DELIVERY_KEY_PREFIX = "a2a-";
/** The key of one push delivery: one per (run end, config). Also the suffix of its `webhook-` stream. */
export const pushDeliveryKey = (runId: string, configId: string) => `${PUSH_DELIVERY_KEY_PREFIX}${runId}-${configId}`;

/**
 * Headers of a push (besides the webhook ones): the config's token in `X-A2A-Notification-Token`,
 * and `Authorization` when the config names the Bearer or Basic scheme with credentials.
 */
export function pushHeaders(t: PushTarget): Record<string, string> {
  const headers: Record<string, string> = {};
  if (t.token) headers["x-a2a-notification-token"] = t.token;
  const credentials = t.authentication?.credentials;
  const scheme = t.authentication?.schemes.find((s) => /^(bearer|basic)$/i.test(s));
  if (credentials && scheme) headers.authorization = `${scheme.toLowerCase() === "bearer" ? "Bearer" : "Basic"} ${credentials}`;
  return headers;
}
