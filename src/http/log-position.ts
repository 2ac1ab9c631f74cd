import type { FastifyInstance, FastifyRequest } from "fastify";
import type { CatchUpRunner } from "../read-models/catch-up-runner.js";
import { logPositionHeaders, runInRequestContext, type RequestContext } from "../context/request-context.js";
import { CATCH_UP_TIMEOUT_MS } from "../commands/pipeline.js";

const HEADER = "x-log-position";

/**
 * Read-your-writes. In this process: what the log delivered is folded before a request is served (a
 * run's result may have been answered from the log just before, see CatchUpRunner.settle). Across
 * processes (behind a load balancer): every response to a write carries `X-Log-Position`, the log
 * position of its last append; a request that sends it back waits until this process's read models
 * reached it (at most CATCH_UP_TIMEOUT_MS) before it is served.
 */
export function logPositionHooks(
  readModels: CatchUpRunner,
  contextOf: (request: FastifyRequest) => RequestContext = () => ({}),
): (app: FastifyInstance) => void {
  return (app) => {
    // The request's context (who acts, which request) for everything it calls; see request-context.ts.
    app.addHook("onRequest", (request, _reply, done) => {
      readModels.settle();
      runInRequestContext(contextOf(request), done);
    });
    // Callback hooks, not async ones: most requests carry no X-Log-Position, and an async hook costs
    // every request two promises and two turns of the microtask queue.
    app.addHook("preHandler", (request, reply, done) => {
      const given = request.headers[HEADER];
      if (given === undefined) return done();
      if (typeof given !== "string" || !/^\d{1,20}$/.test(given)) {
        reply.code(422).send({ detail: `X-Log-Position: expected a log position (a non-negative integer), got ${JSON.stringify(given)}` });
        return;
      }
      readModels.waitForAtMost(BigInt(given), CATCH_UP_TIMEOUT_MS).then(() => done(), done);
    });
    app.addHook("onSend", (_request, reply, payload, done) => {
      reply.headers(logPositionHeaders());
      done(null, payload);
    });
  };
}
