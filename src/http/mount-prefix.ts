/**
 * `http.mount_prefix` (as the Python server's MOUNT_PREFIX): the whole API, custom routes
 * included, is served under the prefix. The request-target rewrite (request-target.ts) strips it
 * after checking the target; requests outside it are sent to a path no route has, so they get
 * the ordinary 404.
 */

/** `/prefix` without a trailing slash; "" for none ("/" included). */
export function normalizeMountPrefix(prefix: string | undefined): string {
  if (!prefix) return "";
  const trimmed = `/${prefix}`.replace(/\/+/g, "/").replace(/\/$/, "");
  return trimmed;
}

/**
 * The part of a request URL inside the prefix, or undefined when it is outside. Given the checked
 * target (no dot segments), so `/prefix/../x` never gets here to be read as inside.
 */
export function stripMountPrefix(url: string, prefix: string): string | undefined {
  if (!prefix) return url;
  if (url === prefix) return "/";
  if (url.startsWith(prefix) && (url[prefix.length] === "/" || url[prefix.length] === "?")) {
    const rest = url.slice(prefix.length);
    return rest.startsWith("?") ? `/${rest}` : rest;
  }
  return undefined;
}
