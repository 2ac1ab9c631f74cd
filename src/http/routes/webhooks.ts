import type { FastifyPluginAsync } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import * as z from "zod";
import type { AppContext } from "../../app/context.js";
import { webhookAttempts } from "../../app/webhooks.js";
import { Uuid } from "../schemas.js";
import { callerOf } from "../auth.js";

/** The delivery log of a run's webhook: every attempt with its outcome, then delivered or failed. */
export function webhookRoutes(ctx: AppContext): FastifyPluginAsync {
  return async (app) => {
    const r = app.withTypeProvider<ZodTypeProvider>();
    const tags = ["runs"];
    r.get("/runs/:run_id/webhooks", { schema: { tags, params: z.object({ run_id: Uuid }) } }, async (req) => {
      return webhookAttempts(ctx, callerOf(req), null, req.params.run_id);
    });
    for (const prefix of ["/threads", "/thread"]) {
      r.get(
        `${prefix}/:thread_id/runs/:run_id/webhooks`,
        { schema: { tags, hide: prefix === "/thread", params: z.object({ thread_id: Uuid, run_id: Uuid }) } },
        async (req) => {
          return webhookAttempts(ctx, callerOf(req), req.params.thread_id, req.params.run_id);
        },
      );
    }
  };
}
