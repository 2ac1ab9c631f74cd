import { createHmac, timingSafeEqual } from "node:crypto";

/**
 * Webhook signatures: `X-Webhook-Signature: v1=<hex HMAC-SHA256 of "<timestamp>.<body>">` with the
 * secret `WEBHOOK_SECRET`, and `X-Webhook-Timestamp: <unix seconds>`. Signing the timestamp with
 * the body lets a receiver refuse replays older than a few minutes.
 */
export const SIGNATURE_HEADER = "x-webhook-signature";
export const TIMESTAMP_HEADER = "x-webhook-timestamp";
export const DELIVERY_ID_HEADER = "x-webhook-id";

export function signWebhook(secret: string, timestamp: string, body: string): string {
  return `v1=${createHmac("sha256", secret).update(`${timestamp}.${body}`).digest("hex")}`;
}

/** What a receiver does (docs/webhooks.md shows the same lines); constant-time comparison. */
export function verifyWebhook(secret: string, timestamp: string, body: string, signature: string): boolean {
  const expected = Buffer.from(signWebhook(secret, timestamp, body));
  const given = Buffer.from(signature);
  return expected.length === given.length && timingSafeEqual(expected, given);
}
