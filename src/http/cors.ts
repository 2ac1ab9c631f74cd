/**
 * CORS for browser clients, with @fastify/cors. Without `http.cors` in langgraph.json the
 * official JS server's policy: any origin, the methods the API uses, the request headers the
 * browser asks for (content-type, x-api-key, authorization, last-event-id, ...), and the
 * response headers clients read exposed. `http.cors` replaces that policy.
 * Registered before authentication: preflights are answered in its onRequest hook (a browser
 * sends them without credentials), and every later response, errors included, carries the
 * headers, so a browser client can read a 401 or a 404.
 */
import type { FastifyCorsOptions } from "@fastify/cors";
import type { HttpConfig } from "../langgraph-config.js";

export type CorsConfig = NonNullable<HttpConfig["cors"]>;

export const API_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];
/** Response headers a client of this API reads (stream resume, pagination, request ids, read-your-writes position). */
export const EXPOSED_HEADERS = ["Content-Location", "Location", "X-Pagination-Total", "X-Pagination-Next", "X-Request-Id", "X-Log-Position"];
/** Always exposed, as the official server insists: the SDK needs them to resume streams and page. */
const REQUIRED_EXPOSED = ["Content-Location", "X-Pagination-Total"];

/** The @fastify/cors options of a `http.cors` section (or the default policy without one). */
export function corsOptions(cors: CorsConfig | undefined): FastifyCorsOptions {
  if (!cors) {
    // allowedHeaders unset: @fastify/cors reflects Access-Control-Request-Headers.
    return { origin: "*", methods: API_METHODS, exposedHeaders: EXPOSED_HEADERS, strictPreflight: false };
  }
  const origins: (string | RegExp)[] = [...(cors.allow_origins ?? [])];
  if (cors.allow_origin_regex) origins.push(new RegExp(cors.allow_origin_regex));
  const anyOrigin = origins.includes("*");
  const exposed = cors.expose_headers ? [...cors.expose_headers] : [...EXPOSED_HEADERS];
  for (const header of REQUIRED_EXPOSED) {
    if (!exposed.some((h) => h.toLowerCase() === header.toLowerCase())) exposed.push(header);
  }
  return {
    // "*" cannot be sent with credentials: the request's origin is echoed back instead.
    origin: anyOrigin ? (cors.allow_credentials ? true : "*") : origins,
    methods: cors.allow_methods ?? API_METHODS,
    ...(cors.allow_headers ? { allowedHeaders: cors.allow_headers } : {}),
    credentials: cors.allow_credentials ?? false,
    exposedHeaders: exposed,
    ...(cors.max_age !== undefined ? { maxAge: cors.max_age } : {}),
    strictPreflight: false,
  };
}
