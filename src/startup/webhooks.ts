import type { EventStore } from "../eventstore/types.js";
import type { ReadModels } from "../read-models/all.js";
import { WebhookDispatcher } from "../webhooks/dispatcher.js";
import { threadedSender } from "../webhooks/threaded-sender.js";
import { undiciSender } from "../webhooks/sender.js";
import { webhookUrlPolicyFor } from "../webhooks/mode-policy.js";
import { a2aPushBody } from "../a2a/push-body.js";
import type { Assembly } from "./assembly.js";
import type { Configuration } from "./configuration.js";
import type { Services } from "./services.js";

/**
 * The webhook sender and its dispatcher, registered on `parts` (the dispatcher closes first);
 * undefined when `http.disable_webhooks` is set.
 */
export function startWebhooks(
  { config, deps, parts, metrics, logClock }: Assembly,
  { langgraph }: Configuration,
  store: EventStore,
  readModels: ReadModels,
  { ctx, runs, webhookHeaders }: Services,
  selfUrl: string,
): WebhookDispatcher | undefined {
  if (webhookHeaders === undefined) return undefined;
  const pushBody = a2aPushBody(ctx, runs);
  const w = config.webhooks;
  const policy = webhookUrlPolicyFor(langgraph.config.webhooks.url, config.devMode);
  const sendOptions = { connectTimeoutMs: w.connectTimeoutMs, totalTimeoutMs: w.timeoutMs, policy, connections: w.concurrency };
  // A resolver injected (tests) lives in this thread; otherwise the sender has a thread of its own.
  const sender = parts.use("webhook sender", deps.resolver ? undiciSender({ ...sendOptions, resolver: deps.resolver }) : threadedSender(sendOptions), (s) =>
    s.close(),
  );
  const dispatcher = parts.use(
    "webhook dispatcher",
    new WebhookDispatcher({
      store,
      readModels,
      policy,
      retry: { maxAttempts: w.maxAttempts, baseMs: w.retryBaseMs, maxDelayMs: w.retryMaxMs },
      send: sender.send,
      headers: webhookHeaders,
      secret: w.secret,
      allowedFields: langgraph.config.webhooks.allowed_fields,
      concurrency: w.concurrency,
      // One attempt lasts at most the total timeout; the lease outlives it.
      leaseMs: w.leaseMs,
      exclusiveStore: store.kind === "sqlite",
      selfUrl: () => selfUrl,
      resolver: deps.resolver,
      clock: logClock,
      log: (m) => console.error(m),
      onAttempt: metrics.onWebhookAttempt,
      pushBody,
    }),
    (d) => d.stop(),
  );
  metrics.webhooksInFlight = () => dispatcher.inFlight;
  metrics.claims.webhook = () => ({ won: dispatcher.stats.claimed, lost: dispatcher.stats.lost });
  metrics.claimOwners.webhook = dispatcher.owner;
  dispatcher.start();
  return dispatcher;
}
