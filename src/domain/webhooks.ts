import * as z from "zod";
import type { Decision } from "./decision.js";
import { v5 as uuidv5 } from "uuid";
import type { EventsOf } from "./event-types.js";
import type { EventData } from "../eventstore/types.js";
import type { RunRecord } from "./run-record.js";
import type { RunEnded } from "./runs.js";
import { pushDeliveryKey, type PushTarget, type StoredPushConfig } from "./a2a-push.js";

/**
 * Webhook deliveries: one stream `webhook-{run_id}` per run created with a `webhook` URL (and
 * `webhook-{pushDeliveryKey}` per A2A push notification, see ./a2a-push.ts). Every
 * attempt is claimed first (an append with the stream's expected revision: one sender wins), then
 * its outcome is appended by the claimer. The claim carries a lease so that a dead sender's
 * delivery is taken over; delivery is therefore at least once, and receivers de-duplicate on the
 * delivery id, which is the same for every attempt.
 */
export const WEBHOOK_STREAM_PREFIX = "webhook-";
export const webhookStream = (key: string) => `${WEBHOOK_STREAM_PREFIX}${key}`;

const DELIVERY_NAMESPACE = "4c2b0f55-5b0e-4d53-9a3c-0c8f7a1e6d42";
/** Stable across retries and processes: derived from the delivery key (the run id for a run webhook). */
export const deliveryIdOf = (key: string) => uuidv5(`webhook:${key}`, DELIVERY_NAMESPACE);

export const WebhookOutcomeSchema = z.enum(["delivered", "retry", "failed"]);

export const webhookEventSchemas = {
  /** A sender took the next attempt; until `lease_expires_at` (ms since epoch) nobody else sends. */
  WebhookClaimed: z.object({
    owner: z.string(),
    attempt: z.number().int().positive(),
    delivery_id: z.string(),
    claimed_at: z.string(),
    lease_expires_at: z.number(),
  }),
  /** One HTTP attempt and what came of it (`retry_at`, ms since epoch, when another follows). */
  WebhookAttempted: z.object({
    owner: z.string(),
    attempt: z.number().int().positive(),
    delivery_id: z.string(),
    started_at: z.string(),
    duration_ms: z.number().nonnegative(),
    status_code: z.number().int().optional(),
    error: z.string().optional(),
    outcome: WebhookOutcomeSchema,
    retry_at: z.number().optional(),
  }),
  WebhookDelivered: z.object({ attempts: z.number().int().positive(), delivered_at: z.string() }),
  /** Final: a 4xx other than 408/429, a refused URL, or the last attempt failed. */
  WebhookFailed: z.object({ attempts: z.number().int().nonnegative(), reason: z.string(), failed_at: z.string() }),
} satisfies Record<string, z.ZodType>;

export type WebhookEvent = EventsOf<typeof webhookEventSchemas>;
export type WebhookAttempted = z.infer<typeof webhookEventSchemas.WebhookAttempted>;

/**
 * - waiting: the run has not ended yet;
 * - due: an attempt should start at `due_at`;
 * - sending: claimed; the claim lapses at `due_at` (its lease);
 * - delivered / failed: final.
 */
export type DeliveryStatus = "waiting" | "due" | "sending" | "delivered" | "failed";

/**
 * Everything needed to send one delivery, folded from its run and webhook events: a run's
 * webhook (key = run id, `run` set) or an A2A push notification of a run's end to one config
 * (key = pushDeliveryKey, `push` set; its body is the task, built when sent).
 */
export interface Delivery {
  /** The delivery key: names `webhook-{key}` and the row. Absent in rows of older versions: the run id. */
  key?: string;
  run_id: string;
  url: string;
  run?: RunRecord;
  push?: PushTarget;
  run_started_at: string | null;
  ended?: RunEnded;
  status: DeliveryStatus;
  /** When the next attempt is due, or when the current claim lapses (ms since epoch); null when none. */
  due_at: number | null;
  attempts: number;
  owner?: string;
  /** Revision of `webhook-{run_id}`, for the next append's expected revision. */
  revision: bigint | "no_stream";
}

export function deliveryOf(run: RunRecord): Delivery | undefined {
  const url = run.kwargs.webhook;
  if (!url) return undefined;
  return { run_id: run.run_id, url, run, run_started_at: null, status: "waiting", due_at: null, attempts: 0, revision: "no_stream" };
}

export const deliveryKey = (d: Pick<Delivery, "key" | "run_id">) => d.key ?? d.run_id;

/** A push notification of a run's end to one config of its task: due at the run's end. */
export function pushDeliveryOf(runId: string, config: StoredPushConfig, taskId: string, ended: RunEnded): Delivery {
  const push: PushTarget = { task_id: taskId, config_id: config.id, protocol: config.protocol };
  if (config.token !== undefined) push.token = config.token;
  if (config.authentication !== undefined) push.authentication = config.authentication;
  return {
    key: pushDeliveryKey(runId, config.id),
    run_id: runId,
    url: config.url,
    push,
    run_started_at: null,
    ended,
    status: "due",
    due_at: Date.parse(ended.ended_at),
    attempts: 0,
    revision: "no_stream",
  };
}

/** The run ended: its webhook is due now. */
export function deliveryRunEnded(d: Delivery, ended: RunEnded): Delivery {
  if (d.ended) return d;
  return { ...d, ended, status: d.status === "waiting" ? "due" : d.status, due_at: d.status === "waiting" ? Date.parse(ended.ended_at) : d.due_at };
}

export function deliveryRunStarted(d: Delivery, claimedAt: string): Delivery {
  return d.run_started_at ? d : { ...d, run_started_at: claimedAt };
}

/** Pure fold of `webhook-{run_id}` into the delivery. */
export function evolveDelivery(d: Delivery, event: WebhookEvent, revision: bigint): Delivery {
  switch (event.type) {
    case "WebhookClaimed":
      return { ...d, revision, status: "sending", owner: event.data.owner, due_at: event.data.lease_expires_at };
    case "WebhookAttempted": {
      const e = event.data;
      const attempts = Math.max(d.attempts, e.attempt);
      if (e.outcome === "retry") return { ...d, revision, attempts, status: "due", due_at: e.retry_at ?? null, owner: undefined };
      return { ...d, revision, attempts };
    }
    case "WebhookDelivered":
      return { ...d, revision, status: "delivered", due_at: null, owner: undefined };
    case "WebhookFailed":
      return { ...d, revision, status: "failed", due_at: null, owner: undefined };
  }
}

// ---- deciders (pure) ----

export type WebhookDecision = { ok: true; events: EventData[]; attempt: number } | Extract<Decision, { ok: false }>;

/**
 * Claim the next attempt: when it is due, or when the current claim's lease lapsed (its sender
 * died), or when `takeover` says every other owner is dead (a single-process store at start).
 */
export function decideWebhookClaim(d: Delivery, cmd: { owner: string; now: string; nowMs: number; leaseMs: number; takeover?: boolean }): WebhookDecision {
  if (d.status === "waiting") return { ok: false, kind: "conflict", detail: "run has not ended" };
  if (d.status === "delivered" || d.status === "failed") return { ok: false, kind: "conflict", detail: `delivery already ${d.status}` };
  const lapsed = d.due_at === null || d.due_at <= cmd.nowMs;
  if (d.status === "sending" && !lapsed && !(cmd.takeover && d.owner !== cmd.owner)) return { ok: false, kind: "conflict", detail: "delivery claimed" };
  if (d.status === "due" && !lapsed) return { ok: false, kind: "conflict", detail: "not due yet" };
  const attempt = d.attempts + 1;
  return {
    ok: true,
    attempt,
    events: [
      {
        type: "WebhookClaimed",
        data: { owner: cmd.owner, attempt, delivery_id: deliveryIdOf(deliveryKey(d)), claimed_at: cmd.now, lease_expires_at: cmd.nowMs + cmd.leaseMs },
      },
    ],
  };
}

/** The events that record one attempt's result (appended by the claimer, after its claim). */
export function attemptEvents(attempted: WebhookAttempted, now: string, reason?: string): EventData[] {
  const events: EventData[] = [{ type: "WebhookAttempted", data: attempted }];
  if (attempted.outcome === "delivered") events.push({ type: "WebhookDelivered", data: { attempts: attempted.attempt, delivered_at: now } });
  if (attempted.outcome === "failed") {
    events.push({
      type: "WebhookFailed",
      data: { attempts: attempted.attempt, reason: reason ?? attempted.error ?? `HTTP ${attempted.status_code}`, failed_at: now },
    });
  }
  return events;
}
