/**
 * Which request headers reach a run's `configurable` (and so the log, forever): the official
 * (Python) server's `http.configurable_headers` semantics.
 *
 * - `langsmith-trace` is always kept, with the `langsmith-metadata`, `langsmith-tags` and
 *   `langsmith-project` entries of `baggage` (tracing context, as the official server does).
 * - `authorization`, `x-api-key`, `x-service-key` and `x-tenant-id` are never kept.
 * - Any other header is kept only when it matches an `includes` pattern and no `excludes`
 *   pattern (excludes win). Without `includes`, nothing else is kept: by default no `x-*` header,
 *   no `user-agent`, no cookie reaches the log.
 * Patterns are header names with `*` for any run of characters, case-insensitive; nothing else is
 * special (no regular expressions).
 */
export interface ConfigurableHeadersPolicy {
  includes: readonly string[];
  excludes: readonly string[];
}

export const DEFAULT_CONFIGURABLE_HEADERS: ConfigurableHeadersPolicy = { includes: [], excludes: [] };

const NEVER = new Set(["authorization", "x-api-key", "x-service-key", "x-tenant-id"]);
const BAGGAGE_KEYS = new Set(["langsmith-metadata", "langsmith-tags", "langsmith-project"]);

/** A pattern as an anchored regular expression: literals escaped, `*` = `.*`. */
function compile(pattern: string): RegExp {
  const body = pattern
    .toLowerCase()
    .split("*")
    .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))
    .join(".*");
  return new RegExp(`^${body}$`, "s");
}

/** Compiles a policy once; the returned function picks the headers of one request. */
export function configurableHeadersOf(policy: ConfigurableHeadersPolicy): (headers: Record<string, string | string[] | undefined>) => Record<string, unknown> {
  const includes = policy.includes.map(compile);
  const excludes = policy.excludes.map(compile);
  const allowed = (name: string) => !NEVER.has(name) && !excludes.some((p) => p.test(name)) && includes.some((p) => p.test(name));
  return (headers) => {
    const out: Record<string, unknown> = {};
    for (const [rawName, value] of Object.entries(headers)) {
      if (typeof value !== "string") continue;
      const name = rawName.toLowerCase();
      if (name === "langsmith-trace") {
        out[name] = value;
        Object.assign(out, baggageOf(headers.baggage));
        continue;
      }
      if (allowed(name)) out[name] = value;
    }
    return out;
  };
}

function baggageOf(baggage: string | string[] | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (typeof baggage !== "string") return out;
  for (const item of baggage.split(",")) {
    const eq = item.indexOf("=");
    if (eq < 0) continue;
    const key = item.slice(0, eq).trim();
    if (!BAGGAGE_KEYS.has(key)) continue;
    let value: string;
    try {
      value = decodeURIComponent(item.slice(eq + 1).trim());
    } catch {
      continue;
    }
    if (key === "langsmith-tags") out[key] = value.split(",");
    else if (key === "langsmith-metadata") {
      try {
        out[key] = JSON.parse(value);
      } catch {
        // not JSON: left out
      }
    } else out[key] = value;
  }
  return out;
}
