/**
 * The request target, checked once for every request before anything reads it: fastify's router,
 * the public-path check, the API key, custom auth and the custom app (`http.app`) all see the one
 * path this module hands on, so they can never disagree about which path a request names.
 *
 * Targets that two readers could read differently are refused (400 `{"detail"}`) instead of
 * normalized: a normalizer would have to reproduce the URL parser of every reader exactly (the
 * WHATWG parser behind `new Request(url)` resolves `..` and `%2e%2e` and reads `\` as `/`;
 * fastify's router resolves none of them), and a client of this API never needs such a target
 * (fetch, the SDKs and curl without --path-as-is resolve dot segments before sending). Refused:
 *   - dot segments (`.`, `..`, also percent-encoded: `%2e`, `%2E`, `.%2e`, ...);
 *   - encoded separators (`%2F`, `%5C`), which a reader that decodes before splitting would split;
 *   - a backslash, a fragment (`#`), and any byte a path may not carry unencoded (non-ASCII,
 *     quotes, braces, ...): the WHATWG parser rewrites those, the router does not;
 *   - malformed percent-encoding (`%zz`, `%FF` alone), which fastify's router cannot decode;
 *   - targets that are not a path: absolute-form (`GET http://host/x`), which the router reads as
 *     `/x` while a path check reads the whole string, and asterisk-form (`OPTIONS *`). Only a
 *     proxy is sent absolute-form, so refusing it costs an origin server's clients nothing;
 *   - a Host header that is not a plain `host[:port]` the URL parser accepts, or more than one:
 *     the custom app's and the auth handler's URL is built from it, and a `/` or `?` in it would
 *     move the path.
 * Percent-encoded unreserved characters (`%6F` for `o`) are decoded, as RFC 3986 allows, so the
 * public-path check sees `/ok` where the router (which decodes them too) routes `/ok`.
 *
 * What is accepted reads the same everywhere: a `;` is part of the segment for the router
 * (useSemicolonDelimiter off), for Hono and for the public check; a duplicate slash or a trailing
 * slash is kept by all of them (`//ok` and `/ok/` are 404s, not `/ok`), and the query string is
 * never part of the path.
 */
import type { IncomingMessage } from "node:http";
import type { FastifyInstance, FastifyRequest, FastifyServerOptions } from "fastify";
import { stripMountPrefix } from "./mount-prefix.js";

export type CheckedTarget = { path: string; url: string } | { refused: string };

/** Characters a path may carry as they are (RFC 3986 pchar and `/`); `%` starts an encoding. */
const PATH_CHARS = /^[A-Za-z0-9\-._~!$&'()*+,;=:@/%]*$/;
const UNRESERVED = /^[A-Za-z0-9\-._~]$/;
/** `%2F` and `%5C`: a reader that decodes before it splits sees a separator there. */
const ENCODED_SEPARATOR = /%(2f|5c)/i;

/**
 * The canonical form of a request target (origin-form, unreserved characters decoded) and its
 * path, or why it is refused; `host` is the Host header (none: HTTP/1.0 may omit it). Pure: the
 * rewrite below applies it to every request.
 */
export function checkRequestTarget(target: string, host?: string): CheckedTarget {
  if (target[0] !== "/") return { refused: "The request target must be a path (absolute-form and asterisk-form targets are not served)" };
  if (target.includes("#")) return { refused: "The request target must not carry a fragment (#)" };
  const q = target.indexOf("?");
  const raw = q === -1 ? target : target.slice(0, q);
  const query = q === -1 ? "" : target.slice(q);
  if (!PATH_CHARS.test(raw)) return { refused: "The path has characters that must be percent-encoded (a backslash, a quote, a brace, a non-ASCII byte, ...)" };
  let path = raw;
  if (raw.includes("%")) {
    if (ENCODED_SEPARATOR.test(raw)) return { refused: "The path must not carry an encoded slash or backslash (%2F, %5C)" };
    try {
      decodeURI(raw);
    } catch {
      return { refused: "The path has malformed percent-encoding" };
    }
    path = raw.replace(/%[0-9A-Fa-f]{2}/g, (encoded) => {
      const char = String.fromCharCode(parseInt(encoded.slice(1), 16));
      return UNRESERVED.test(char) ? char : encoded;
    });
  }
  for (const segment of path.split("/")) {
    if (segment === "." || segment === "..") return { refused: "The path must not carry dot segments (. or .., encoded or not)" };
  }
  if (host && !PLAIN_HOST.test(host)) return { refused: BAD_HOST };
  // What the custom app and the auth handler are given (requestUrl) goes through the WHATWG
  // parser: a URL it cannot parse, or whose path it would read differently from the router, is
  // refused, whatever the reason. The checks above make the path agree; this asserts it, so that a
  // gap in them fails closed, and catches a host it refuses (`127y0.0.1` reads as a bad IPv4).
  let parsed: URL;
  try {
    parsed = new URL(`http://${host || "localhost"}${path}`);
  } catch {
    return { refused: BAD_HOST };
  }
  if (parsed.pathname !== path) return { refused: "The path is not in canonical form" };
  return { path, url: `${path}${query}` };
}

/** A Host fit to write into a URL: a name or an IPv4 or bracketed IPv6 address, and a port. */
const PLAIN_HOST = /^(?:[A-Za-z0-9_.-]+|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$/;
const BAD_HOST = "The Host header must be a valid host[:port]";

/** Whether the request has more than one Host header (node keeps the first one only). */
function hostRepeated(req: IncomingMessage): boolean {
  const raw = req.rawHeaders ?? [];
  let count = 0;
  for (let i = 0; i < raw.length; i += 2) if (raw[i].length === 4 && raw[i].toLowerCase() === "host") count++;
  return count > 1;
}

// ---------------------------------------------------------------------------------------------
// applied to every request

/** What the check found, per request; requests never checked (none, by construction) have nothing. */
const checked = new WeakMap<IncomingMessage, { path: string } | { refused: string }>();

/** Where a refused request is routed: no route has it and it is not public (the refusal hook answers first). */
const REFUSED = "/__refused_request_target__";
/** Where a request outside the mount prefix is routed: no route has it, so it gets the ordinary 404. */
const OUTSIDE = "/__outside_mount_prefix__";

/**
 * fastify's `rewriteUrl`: checks the target and the Host, then strips the mount prefix. The
 * result is `request.url` for every hook and route and what the router routes (fastify calls it
 * before routing, for WebSocket upgrades and `inject` too).
 */
export function requestTargetRewrite(mountPrefix: string): Required<Pick<FastifyServerOptions, "rewriteUrl">> {
  return {
    rewriteUrl: (req) => {
      const target = hostRepeated(req) ? { refused: "More than one Host header" } : checkRequestTarget(req.url ?? "", req.headers.host);
      if ("refused" in target) {
        checked.set(req, target);
        return REFUSED;
      }
      const { url } = target;
      const inside = stripMountPrefix(url, mountPrefix);
      const routed = inside ?? `${OUTSIDE}${url}`;
      checked.set(req, { path: routed.split("?")[0] });
      return routed;
    },
  };
}

/** Answers a refused target with 400 before the API key, custom auth or the custom app see it (added right after CORS, which reads no path). */
export function refuseBadTargets(app: FastifyInstance): void {
  app.addHook("onRequest", (request, reply, done) => {
    const found = checked.get(request.raw);
    if (found === undefined || "refused" in found) {
      const detail = found?.refused ?? "The request target was not checked";
      request.log.debug({ target: request.originalUrl, host: request.headers.host }, detail);
      reply.code(400).send({ detail });
      return;
    }
    done();
  });
}

/** The checked path of the request (under the mount prefix, no query); undefined if it was refused. */
export function requestPath(request: FastifyRequest): string | undefined {
  const found = checked.get(request.raw);
  return found && "path" in found ? found.path : undefined;
}

/**
 * The absolute URL of the request as the custom app and the auth handler see it: the checked
 * target under the (checked) Host. Concatenated, not resolved against a base: a path starting
 * with `//` must stay a path.
 */
export function requestUrl(request: FastifyRequest): string {
  return `${request.protocol}://${request.headers.host || "localhost"}${request.url}`;
}
