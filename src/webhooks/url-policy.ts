import { lookup } from "node:dns/promises";
import ipaddr from "ipaddr.js";
import type { WebhookUrlPolicy } from "../langgraph-config.js";

/**
 * The webhook URL policy (langgraph.json `webhooks.url`), checked at run creation and again at
 * send time after DNS resolution. Messages are the Python server's. We are stricter than it:
 * private, loopback and link-local addresses are refused unless `disable_private_ips` is false,
 * and cloud metadata endpoints are refused always.
 */

export type PolicyResult = { ok: true; relative: boolean } | { ok: false; detail: string };

export interface ResolvedAddress {
  address: string;
  family: number;
}
/** Host name → its addresses (injectable so tests resolve names to chosen addresses). */
export type Resolver = (host: string) => Promise<ResolvedAddress[]>;
export const systemResolver: Resolver = (host) => lookup(host, { all: true, verbatim: true });

/** Names of cloud metadata services; their addresses are in METADATA_ADDRESSES. */
const METADATA_HOSTS = new Set(["metadata.google.internal", "metadata.goog", "metadata", "instance-data", "instance-data.ec2.internal"]);
const METADATA_ADDRESSES = new Set(["169.254.169.254", "169.254.170.2", "100.100.100.200", "fd00:ec2::254"]);

const blocked = (reason: string): PolicyResult => ({ ok: false, detail: `Webhook host blocked: ${reason}` });

/** Why an address may not receive webhooks, or undefined when it may. */
export function addressRefusal(address: string, policy: Pick<WebhookUrlPolicy, "disable_private_ips">): string | undefined {
  if (!ipaddr.isValid(address)) return `${address} is not an IP address`;
  let ip = ipaddr.parse(address);
  if (ip.kind() === "ipv6" && (ip as ipaddr.IPv6).isIPv4MappedAddress()) ip = (ip as ipaddr.IPv6).toIPv4Address();
  const normal = ip.toString();
  if (METADATA_ADDRESSES.has(normal)) return `${normal} is a cloud metadata endpoint`;
  if (!policy.disable_private_ips) return undefined;
  const range = ip.range();
  if (range === "unicast") return undefined;
  const names: Record<string, string> = {
    loopback: "loopback",
    private: "private",
    linkLocal: "link-local",
    uniqueLocal: "private (unique local)",
    carrierGradeNat: "private (carrier-grade NAT)",
    unspecified: "unspecified",
  };
  return `${normal} is a ${names[range] ?? `reserved (${range})`} address`;
}

/** Host as written in the URL, without IPv6 brackets. */
const bareHost = (hostname: string) => (hostname.startsWith("[") ? hostname.slice(1, -1) : hostname);

/** The checks that need no DNS: length, relative URLs, scheme, port, domain, literal addresses. */
export function checkWebhookUrl(url: string, policy: WebhookUrlPolicy): PolicyResult {
  if (url.length > policy.max_url_length) return { ok: false, detail: "Webhook URL too long" };
  if (url.startsWith("/")) {
    if (url.startsWith("//")) return { ok: false, detail: "Invalid webhook URL: a relative URL must start with a single /" };
    return policy.disable_loopback ? { ok: false, detail: "Loopback webhooks are disabled" } : { ok: true, relative: true };
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return { ok: false, detail: "Invalid webhook URL: expected an absolute http(s) URL or a path starting with /" };
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:")
    return { ok: false, detail: `Invalid webhook URL: scheme ${parsed.protocol.slice(0, -1)} is not http or https` };
  if (policy.require_https && parsed.protocol !== "https:") return { ok: false, detail: "Webhook must use https" };
  const port = parsed.port ? Number(parsed.port) : parsed.protocol === "https:" ? 443 : 80;
  if (policy.allowed_ports && !policy.allowed_ports.includes(port)) return { ok: false, detail: `Webhook port ${port} not allowed` };
  const host = bareHost(parsed.hostname).toLowerCase();
  if (!host) return { ok: false, detail: `Invalid webhook hostname '${host}'` };
  if (policy.allowed_domains && policy.allowed_domains.length > 0) {
    const allowed = policy.allowed_domains.some((pattern) => {
      const p = pattern.trim().toLowerCase();
      return p.startsWith("*.") ? host.endsWith(p.slice(1)) : host === p;
    });
    if (!allowed) return { ok: false, detail: "Webhook domain not allowed" };
  }
  if (METADATA_HOSTS.has(host)) return blocked(`${host} is a cloud metadata endpoint`);
  if (ipaddr.isValid(host)) {
    const refusal = addressRefusal(host, policy);
    if (refusal) return blocked(refusal);
  } else if (policy.disable_private_ips && (host === "localhost" || host.endsWith(".localhost"))) {
    return blocked(`${host} is a loopback name`);
  }
  return { ok: true, relative: false };
}

/** The full check: the static one, then every address the host resolves to (send time). */
export async function checkWebhookUrlResolved(url: string, policy: WebhookUrlPolicy, resolver: Resolver = systemResolver): Promise<PolicyResult> {
  const first = checkWebhookUrl(url, policy);
  if (!first.ok || first.relative) return first;
  const host = bareHost(new URL(url).hostname);
  if (ipaddr.isValid(host)) return first;
  let addresses: ResolvedAddress[];
  try {
    addresses = await resolver(host);
  } catch (error) {
    return blocked(`${host} does not resolve (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
  }
  if (addresses.length === 0) return blocked(`${host} does not resolve`);
  for (const a of addresses) {
    const refusal = addressRefusal(a.address, policy);
    if (refusal) return blocked(`${host} resolves to ${refusal.replace(/^\S+ is /, `${a.address}, `)}`);
  }
  return first;
}
