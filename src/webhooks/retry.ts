/**
 * When to try a webhook again: exponential backoff with jitter, `Retry-After` honoured, and which
 * answers are final. Defaults: 8 attempts, 5 s doubling to at most 5 min between them (about 10
 * minutes in all).
 */
export interface RetryPolicy {
  maxAttempts: number;
  baseMs: number;
  maxDelayMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { maxAttempts: 8, baseMs: 5_000, maxDelayMs: 300_000 };

/** Delay after failed attempt `attempt` (1-based): base·2^(attempt-1), capped, ±20 % jitter so retries of many deliveries spread out. */
export function backoffDelay(attempt: number, policy: RetryPolicy, random: () => number = Math.random): number {
  const raw = Math.min(policy.maxDelayMs, policy.baseMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(raw * (0.8 + 0.4 * random()));
}

/** `Retry-After` as delta seconds or an HTTP date → ms from now; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | undefined, nowMs: number): number | undefined {
  if (value === undefined) return undefined;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const date = Date.parse(trimmed);
  return Number.isNaN(date) ? undefined : Math.max(0, date - nowMs);
}

/** The longest wait a `Retry-After` may impose (one hour). */
export const MAX_RETRY_AFTER_MS = 3_600_000;

export type AttemptResult = { statusCode: number; retryAfter?: string } | { error: string; final?: boolean };

/** 2xx delivered; 4xx other than 408/429 final; everything else (5xx, 408, 429, network, timeout) retried while attempts remain. */
export function classifyAttempt(
  result: AttemptResult,
  attempt: number,
  policy: RetryPolicy,
  nowMs: number,
  random: () => number = Math.random,
): { outcome: "delivered" } | { outcome: "failed"; reason: string } | { outcome: "retry"; retryAt: number } {
  if ("statusCode" in result) {
    const s = result.statusCode;
    if (s >= 200 && s < 300) return { outcome: "delivered" };
    if (s >= 400 && s < 500 && s !== 408 && s !== 429) return { outcome: "failed", reason: `receiver answered ${s}` };
    if (s < 200 || (s >= 300 && s < 400)) return { outcome: "failed", reason: `receiver answered ${s}` };
  } else if (result.final) {
    return { outcome: "failed", reason: result.error };
  }
  if (attempt >= policy.maxAttempts) {
    return { outcome: "failed", reason: `gave up after ${attempt} attempts (last: ${"statusCode" in result ? `HTTP ${result.statusCode}` : result.error})` };
  }
  const retryAfter = "statusCode" in result ? parseRetryAfter(result.retryAfter, nowMs) : undefined;
  const delay = retryAfter !== undefined ? Math.min(retryAfter, MAX_RETRY_AFTER_MS) : backoffDelay(attempt, policy, random);
  return { outcome: "retry", retryAt: nowMs + delay };
}
