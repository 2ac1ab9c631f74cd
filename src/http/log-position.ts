import type { FastifyInstance, FastifyRequest } from "fastify";
import type { CatchUpRunner } from "../read-models/catch-up-runner.js";
import { logPositionHeaders, runInRequestContext, type RequestContext } from "../context/request-context.js";
import { CATCH_UP_TIMEOUT_MS } from "../app/commands.js";

const HEADER = "x-log-position";

/**
 * Read-your-writes. In this process: what the log delivered is folded before a request is served (a
 * run's result may have been answered from the log just before, see CatchUpRunner.settle). Across
 * processes (behind a load balancer): every response to a write carries `X-Log-Position`, the log
 * position of its last append; a request that sends it back waits until this process's read models
 * reached it (at most CATCH_UP_TIMEOUT_MS) before it is served.
 */
export function logPositionHooks(readModels: CatchUpRunner, contextOf: (request: FastifyRequest) => RequestContext = () => ({})): (app: FastifyInstance) => void {
  return (app) => {
    // The request's context (who acts, which request) for everything it calls; see request-context.ts.
    app.addHook("onRequest", (request, _reply, done) => {
      readModels.settle();
      runInRequestContext(contextOf(request), done);
    });
    app.addHook("preHandler", async (request, reply) => {
      const given = request.headers[HEADER];
      if (given === undefined) return;
      if (typeof given !== "string" || !/^\d{1,20}$/.test(given)) {
        return reply.code(422).send({ detail: `X-Log-Position: expected a log position (a non-negative integer), got ${JSON.stringify(given)}` });
      }
      await readModels.waitForAtMost(BigInt(given), CATCH_UP_TIMEOUT_MS);
    });
    app.addHook("onSend", async (_request, reply, payload) => {
      reply.headers(logPositionHeaders());
      return payload;
    });
  };
}
