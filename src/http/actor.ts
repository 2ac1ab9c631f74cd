import { randomUUID } from "node:crypto";
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { RequestContext } from "../context/request-context.js";

/**
 * Who a request acts as: the custom-auth user's identity, else the API key's name (`api-key`)
 * when LANGGRAPH_API_KEY is set (every request that got this far presented it), else `anonymous`.
 */
export function actorOf(request: FastifyRequest, apiKeySet: boolean): string {
  const identity = request.auth?.user?.identity;
  if (typeof identity === "string" && identity !== "") return identity;
  return apiKeySet ? "api-key" : "anonymous";
}

/** A client's `X-Request-Id` is kept when it is a sane token (it goes into logs and the log). */
const REQUEST_ID = /^[A-Za-z0-9._:@-]{1,128}$/;

/** Fastify's `genReqId`: the client's `X-Request-Id`, or a new UUID. */
export function requestIdOf(request: { headers: Record<string, string | string[] | undefined> }): string {
  const given = request.headers["x-request-id"];
  return typeof given === "string" && REQUEST_ID.test(given) ? given : randomUUID();
}

/** Echoes the request id in every response (404s and auth failures included): first of all hooks. */
export function echoRequestId(app: FastifyInstance): void {
  app.addHook("onRequest", (request, reply, done) => {
    reply.header("X-Request-Id", request.id);
    done();
  });
}

/** The context a request's appends are attributed with (after authentication ran). */
export function requestContextOf(request: FastifyRequest, apiKeySet: boolean): RequestContext {
  return { requestId: request.id, actor: actorOf(request, apiKeySet), causationId: request.id };
}
