import type { FastifyRequest } from "fastify";

/** Routes anyone may call: liveness, server info, the API description, the A2A agent cards (discovery), the audit page (its data needs the key), metrics, generative UI assets (a `<script src>` sends no key; the component list itself, POST /ui/{agent}, needs it). */
const PUBLIC_PATHS = [/^\/ok$/, /^\/info$/, /^\/docs(\/.*)?$/, /^\/openapi\.json$/, /^(\/a2a\/[^/]+)?\/\.well-known\/agent-card\.json$/, /^\/audit$/, /^\/metrics$/, /^\/ui\/[^/]+\/[^/]+$/];

export const isPublicPath = (path: string) => PUBLIC_PATHS.some((p) => p.test(path));

/**
 * Public routes, and OPTIONS requests: a CORS preflight carries no credentials (the browser
 * strips them) and is answered by the CORS hook before any check; other OPTIONS requests reach
 * no handler (404).
 */
export const isPublicRequest = (request: FastifyRequest) => request.method === "OPTIONS" || isPublicPath(request.url.split("?")[0]);
