import type { FastifyPluginAsync } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import * as z from "zod";
import { truncate, type TruncateDeps } from "../../app/truncate.js";
import { callerOf } from "../auth.js";

const TruncateBody = z.strictObject({
  runs: z.boolean().optional(),
  threads: z.boolean().optional(),
  assistants: z.boolean().optional(),
  checkpointer: z.boolean().optional(),
  store: z.boolean().optional(),
});

/**
 * Development endpoints: registered only when LANGGRAPH_DEV=true (otherwise the path is a 404 like
 * any unknown one). Behind the API key like every route; refused under custom auth (truncate.ts).
 */
export function internalRoutes(deps: TruncateDeps): FastifyPluginAsync {
  return async (app) => {
    const r = app.withTypeProvider<ZodTypeProvider>();
    r.post("/internal/truncate", { schema: { hide: true, body: TruncateBody.default({}) } }, async (req) => {
      await truncate(deps, req.body, callerOf(req));
      return { ok: true };
    });
  };
}
