import type { FastifyPluginAsync } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import * as z from "zod";
import { truncate, type TruncateDeps } from "../../app/truncate.js";
import { eraseUser } from "../../app/erase.js";
import { callerOf } from "../auth.js";

const TruncateBody = z.strictObject({
  runs: z.boolean().optional(),
  threads: z.boolean().optional(),
  assistants: z.boolean().optional(),
  checkpointer: z.boolean().optional(),
  store: z.boolean().optional(),
});

const EraseBody = z.strictObject({
  user_id: z.string().min(1),
  reason: z.string().min(1),
});

/**
 * Operational endpoints, behind the API key like every route. `/internal/truncate` is a development
 * endpoint: registered only when LANGGRAPH_DEV=true (otherwise the path is a 404 like any unknown
 * one), refused under custom auth (truncate.ts). `/internal/erase` is served in every mode: a
 * user's erasure is owed in production; who may ask is decided in the core (src/app/erase.ts).
 */
export function internalRoutes(deps: TruncateDeps, options: { devMode: boolean }): FastifyPluginAsync {
  return async (app) => {
    const r = app.withTypeProvider<ZodTypeProvider>();
    if (options.devMode) {
      r.post("/internal/truncate", { schema: { hide: true, body: TruncateBody.default({}) } }, async (req) => {
        await truncate(deps, req.body, callerOf(req));
        return { ok: true };
      });
    }
    r.post("/internal/erase", { schema: { hide: true, body: EraseBody } }, async (req) => eraseUser(deps, callerOf(req), req.body));
  };
}
