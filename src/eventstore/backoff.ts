/**
 * Waiting out a log that is briefly unreachable: capped exponential backoff with jitter, and a retry
 * loop bounded by a deadline. Pure apart from the clock and timer, which callers may replace.
 */

export interface BackoffPolicy {
  /** Delay before the first retry, ms. */
  baseMs: number;
  /** No delay exceeds this, ms. */
  maxMs: number;
}

/** Subscriptions re-subscribe quickly (a blip is usually short) and at least every 2 s while it lasts. */
export const RESUBSCRIBE_BACKOFF: BackoffPolicy = { baseMs: 100, maxMs: 2_000 };
/** Appends and reads within a request: shorter steps, the request's deadline bounds the whole. */
export const CALL_BACKOFF: BackoffPolicy = { baseMs: 50, maxMs: 1_000 };

/**
 * Delay before retry number `attempt` (0-based): base × 2^attempt capped at max, with "equal jitter"
 * (half fixed, half random) so that many processes cut at once do not all come back in step, while
 * none retries sooner than half its step.
 */
export function backoffDelay(attempt: number, policy: BackoffPolicy, random: () => number = Math.random): number {
  const step = Math.min(policy.maxMs, policy.baseMs * 2 ** Math.min(Math.max(0, attempt), 30));
  return Math.round(step / 2 + random() * (step / 2));
}

export interface RetryOptions {
  /** The whole operation, retries included, must end within this many ms. */
  deadlineMs: number;
  policy: BackoffPolicy;
  /** Whether a failure may go away by itself (connectivity); anything else is thrown at once. */
  isTransient(error: unknown): boolean;
  /** Stops retrying (e.g. the store is closing). */
  shouldStop?: () => boolean;
  /** Called with each transient failure before waiting. */
  onTransient?: (error: unknown, attempt: number) => void;
  /** The error thrown when the deadline passes; given the last transient failure, if any. */
  deadlineError(lastError: unknown): Error;
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
  random?: () => number;
}

const realSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Runs `operation(remainingMs)` until it succeeds, fails with a non-transient error, or the deadline
 * passes. An attempt still pending at the deadline is abandoned (its result ignored): the caller is
 * never kept waiting past the deadline, whatever the network does.
 */
export async function retryWithin<T>(operation: (remainingMs: number) => Promise<T>, o: RetryOptions): Promise<T> {
  const now = o.now ?? Date.now;
  const sleep = o.sleep ?? realSleep;
  const deadline = now() + o.deadlineMs;
  let lastError: unknown;
  for (let attempt = 0; ; attempt++) {
    const remaining = deadline - now();
    if (remaining <= 0) throw o.deadlineError(lastError);
    try {
      return await withinMs(operation(remaining), remaining, () => o.deadlineError(lastError));
    } catch (error) {
      if (!o.isTransient(error) || o.shouldStop?.()) throw error;
      lastError = error;
      o.onTransient?.(error, attempt);
      const delay = Math.min(backoffDelay(attempt, o.policy, o.random), deadline - now());
      if (delay <= 0) throw o.deadlineError(lastError);
      await sleep(delay);
    }
  }
}

/** Settles like `promise`, or rejects with `timeoutError()` after `ms` (the promise is left to settle unobserved). */
function withinMs<T>(promise: Promise<T>, ms: number, timeoutError: () => Error): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    // Not unref'd: someone is waiting for this answer (cleared as soon as the promise settles).
    const timer = setTimeout(() => reject(timeoutError()), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}
