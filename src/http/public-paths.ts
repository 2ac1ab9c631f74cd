import type { FastifyRequest } from "fastify";
import { requestPath } from "./request-target.js";

/** Routes anyone may call: liveness, server info, the API description, the A2A agent cards (discovery), the audit page (its data needs the key), metrics, generative UI assets (a `<script src>` sends no key; the component list itself, POST /ui/{agent}, needs it). */
const PUBLIC_PATHS = [
  /^\/ok$/,
  /^\/info$/,
  /^\/docs(\/.*)?$/,
  /^\/openapi\.json$/,
  /^(\/a2a\/[^/]+)?\/\.well-known\/agent-card\.json$/,
  /^\/audit$/,
  /^\/metrics$/,
  /^\/ui\/[^/]+\/[^/]+$/,
];

export const isPublicPath = (path: string) => PUBLIC_PATHS.some((p) => p.test(path));

/**
 * Whether a request may skip the API key and custom auth: its path is public. The path is the one
 * the request-target check handed on (request-target.ts), the path the router routes and the
 * custom app is given; a request without one (refused) is not public.
 * CORS preflights (OPTIONS, which a browser sends without credentials) are answered by the CORS
 * hook before these checks run; an OPTIONS request that got past it is checked like any other,
 * since the custom app is offered every request that passes.
 */
export function isPublicRequest(request: FastifyRequest): boolean {
  const path = requestPath(request);
  return path !== undefined && isPublicPath(path);
}
