import type { WebhookUrlPolicy } from "../langgraph-config.js";

/**
 * The URL policy in force: langgraph.json's, except that development mode (LANGGRAPH_DEV=true,
 * as `langgraph dev` sets it) lets webhooks reach loopback and private addresses, relative URLs
 * (this server's own routes) included, so a receiver on the developer's machine works without
 * editing the file. Cloud metadata endpoints stay
 * refused (url-policy.ts refuses them whatever this says); production keeps the strict default.
 */
export function webhookUrlPolicyFor(policy: WebhookUrlPolicy, devMode: boolean): WebhookUrlPolicy {
  return devMode ? { ...policy, disable_private_ips: false, disable_loopback: false } : policy;
}
