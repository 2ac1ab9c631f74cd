/**
 * Who asks for an agent card. The card's path is public (discovery needs no API key, and without
 * custom auth anyone may read any card), so the server's authentication hook skips it. Under custom
 * auth a card shows an assistant's name, description and input, which are the assistant's to hide:
 * the card authenticates the request itself with the configured `authenticate`, and what the
 * handler refuses (no or bad credentials: its 401 and `WWW-Authenticate`) is the card's answer.
 * Then `assistants:read` decides, as on GET /assistants/{id}.
 */
import type { FastifyRequest } from "fastify";
import { authenticate } from "../app/auth/engine.js";
import type { Caller } from "../app/auth/caller.js";

/** The request as the Fetch API's `Request` the `authenticate` handler takes (method, absolute URL, headers; no body). */
function webRequestOf(request: FastifyRequest): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(request.headers)) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) headers.append(name, v);
  }
  const host = request.headers.host ?? request.hostname;
  return new Request(`${request.protocol}://${host}${request.url}`, { method: request.method, headers });
}

/** The caller of a card request: as the server saw it, authenticated here when custom auth is on and nobody did. */
export async function cardCaller(request: FastifyRequest, callerOf: (request: FastifyRequest) => Caller): Promise<Caller> {
  const caller = callerOf(request);
  if (caller.handlers === undefined || caller.auth !== undefined) return caller;
  const auth = await authenticate(caller.handlers, webRequestOf(request), (error) => request.log.warn({ err: error }, "authentication failed"));
  return { handlers: caller.handlers, auth };
}
