import type { FastifyPluginAsync } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import * as z from "zod";
import type { AppContext } from "../../app/context.js";
import { quarantinePage } from "../../app/quarantine.js";
import { callerOf } from "../auth.js";

const QuarantineQuery = z.object({
  limit: z.coerce.number().int().min(1).max(1000).optional(),
  /** The `next` of the previous page. */
  before: z
    .string()
    .regex(/^\d{1,19}$/, "expected the `next` of the previous page")
    // A log position is a signed 64-bit integer: a larger one could not even be bound to the query.
    // (zod runs the refinement after a failed regex too: only digits reach BigInt.)
    .refine((v) => !/^\d+$/.test(v) || BigInt(v) <= 9223372036854775807n, "expected the `next` of the previous page")
    .optional(),
});

const QuarantineAnswer = z.object({
  entries: z.array(
    z.object({
      subscriber: z.string(),
      position: z.string().nullable(),
      stream: z.string(),
      revision: z.string().nullable(),
      type: z.string().nullable(),
      error: z.string(),
      quarantined_at: z.string(),
    }),
  ),
  next: z.string().nullable(),
});

/**
 * `GET /audit/quarantine`: what the read models, the run worker, the webhooks and the scheduler
 * skipped (see read-models/quarantine.ts). Not public: the API key and custom auth apply, as on
 * every audit route but the page itself.
 */
export function quarantineRoutes(ctx: AppContext): FastifyPluginAsync {
  return async (app) => {
    const r = app.withTypeProvider<ZodTypeProvider>();
    r.get("/audit/quarantine", { schema: { tags: ["audit"], querystring: QuarantineQuery, response: { 200: QuarantineAnswer } } }, async (req) =>
      quarantinePage(ctx, callerOf(req), { limit: req.query.limit ?? 100, before: req.query.before === undefined ? undefined : BigInt(req.query.before) }),
    );
  };
}
