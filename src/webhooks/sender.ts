import type { LookupFunction } from "node:net";
import type { Agent } from "undici";
import type { WebhookUrlPolicy } from "../langgraph-config.js";
import { addressRefusal, systemResolver, type Resolver } from "./url-policy.js";
import type { AttemptResult } from "./retry.js";

/** Raised inside a connection attempt whose host resolved to an address the policy refuses. */
export class WebhookHostBlockedError extends Error {
  override name = "WebhookHostBlockedError";
}

export interface SendOptions {
  connectTimeoutMs: number;
  totalTimeoutMs: number;
  policy: WebhookUrlPolicy;
  resolver?: Resolver;
  /** Concurrent connections per receiver origin. */
  connections?: number;
}

export type WebhookSender = (url: string, body: string, headers: Record<string, string>, signal?: AbortSignal) => Promise<AttemptResult>;

/**
 * The policy applied where the socket connects: the addresses are resolved and checked right
 * before connecting, so a name cannot resolve to a public address for the check and a private one
 * for the connection (DNS rebinding).
 */
function guardedLookup(policy: WebhookUrlPolicy, resolver: Resolver): LookupFunction {
  return ((hostname: string, options: { all?: boolean }, callback: (err: Error | null, address: unknown, family?: number) => void) => {
    resolver(hostname).then(
      (addresses) => {
        for (const a of addresses) {
          const refusal = addressRefusal(a.address, policy);
          if (refusal) return callback(new WebhookHostBlockedError(`Webhook host blocked: ${hostname} resolves to ${a.address}: ${refusal}`), undefined);
        }
        if (addresses.length === 0) return callback(new Error(`${hostname} does not resolve`), undefined);
        if (options.all) callback(null, addresses);
        else callback(null, addresses[0].address, addresses[0].family);
      },
      (error: Error) => callback(error, undefined),
    );
  }) as LookupFunction;
}

/** Describes a failed request by its root cause (undici wraps socket errors). */
function describeError(error: unknown): { error: string; final?: boolean } {
  let e = error as Error & { code?: string; cause?: unknown };
  for (let i = 0; i < 3 && e?.cause instanceof Error && !(e instanceof WebhookHostBlockedError); i++) e = e.cause as typeof e;
  if (e instanceof WebhookHostBlockedError) return { error: e.message, final: true };
  if (e?.name === "TimeoutError" || e?.name === "AbortError") return { error: `timeout: ${e.message}` };
  return { error: e?.code ? `${e.code}: ${e.message}` : String(e?.message ?? e) };
}

/**
 * POSTs with undici: connect timeout and total timeout, the policy checked at connect time,
 * keep-alive connections shared by deliveries to the same receiver. The response body is read
 * and dropped (only the status matters).
 */
export function undiciSender(o: SendOptions): { send: WebhookSender; close(): Promise<void> } {
  // undici is loaded with the first webhook (memory a server without webhooks never pays).
  let client: Promise<{ agent: Agent; request: typeof import("undici").request }> | undefined;
  const load = () =>
    (client ??= import("undici").then(({ Agent, request }) => ({
      request,
      agent: new Agent({
        connect: { timeout: o.connectTimeoutMs, lookup: guardedLookup(o.policy, o.resolver ?? systemResolver) },
        headersTimeout: o.totalTimeoutMs,
        bodyTimeout: o.totalTimeoutMs,
        connections: o.connections ?? 64,
      }),
    })));
  const send: WebhookSender = async (url, body, headers, signal) => {
    const timeout = AbortSignal.timeout(o.totalTimeoutMs);
    try {
      const { agent, request } = await load();
      const res = await request(url, {
        method: "POST",
        body,
        headers,
        dispatcher: agent,
        signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
      });
      await res.body.dump({ limit: 64 * 1024 }).catch(() => undefined);
      const retryAfter = res.headers["retry-after"];
      return { statusCode: res.statusCode, ...(typeof retryAfter === "string" ? { retryAfter } : {}) };
    } catch (error) {
      if (timeout.aborted) return { error: `timeout: no answer within ${o.totalTimeoutMs} ms` };
      return describeError(error);
    }
  };
  return { send, close: async () => (client ? (await client).agent.close() : undefined) };
}
