import type { FastifyPluginAsync } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import * as z from "zod";
import type { CronsService, CronCreateRequest, CronPatchRequest } from "../../app/crons.js";
import type { AppContext } from "../../app/context.js";
import { callerOf } from "../auth.js";
import { CronPayloadSchema, OnRunCompletedSchema } from "../../domain/crons.js";
import { CRON_SORT_FIELDS } from "../../read-models/crons.js";
import { pick } from "../../domain/json.js";
import { JsonObject, Limit, Offset, SortOrder, ThreadIdParams, Uuid, paginationHeaders } from "../schemas.js";

/** The run-create fields a cron carries (the run request's, picked). */
const PayloadFields = CronPayloadSchema.shape;

const CronCreate = z.object({
  ...PayloadFields,
  assistant_id: z.string().min(1),
  schedule: z.string().min(1),
  timezone: z.string().min(1).optional(),
  end_time: z.string().nullable().optional(),
  enabled: z.boolean().optional(),
  on_run_completed: OnRunCompletedSchema.optional(),
});

const CronPatch = z.object({
  ...PayloadFields,
  schedule: z.string().min(1).optional(),
  timezone: z.string().min(1).optional(),
  end_time: z.string().nullable().optional(),
  enabled: z.boolean().optional(),
  on_run_completed: OnRunCompletedSchema.optional(),
});

const CronFields = [
  "cron_id",
  "assistant_id",
  "thread_id",
  "on_run_completed",
  "end_time",
  "schedule",
  "timezone",
  "created_at",
  "updated_at",
  "user_id",
  "payload",
  "next_run_date",
  "metadata",
  "enabled",
  "now",
] as const;

const Filter = {
  assistant_id: z.string().min(1).optional(),
  thread_id: Uuid.optional(),
  enabled: z.boolean().optional(),
  metadata: JsonObject.optional(),
};
const SearchBody = z.object({
  ...Filter,
  limit: Limit,
  offset: Offset,
  sort_by: z.enum(CRON_SORT_FIELDS).optional(),
  sort_order: SortOrder.optional(),
  select: z.array(z.enum(CronFields)).optional(),
});
const CronParams = z.object({ cron_id: Uuid });

/** Crons (reference A.5): stateless (a new thread per tick) and thread crons, search, count, patch, delete. */
export function cronRoutes(ctx: AppContext, crons: CronsService): FastifyPluginAsync {
  return async (app) => {
    const r = app.withTypeProvider<ZodTypeProvider>();
    const tags = ["crons"];

    r.post("/runs/crons", { schema: { tags, body: CronCreate } }, async (req) => crons.create(callerOf(req), null, req.body as CronCreateRequest));

    for (const prefix of ["/threads", "/thread"]) {
      r.post(`${prefix}/:thread_id/runs/crons`, { schema: { tags, hide: prefix === "/thread", params: ThreadIdParams, body: CronCreate } }, async (req) =>
        crons.create(callerOf(req), req.params.thread_id, req.body as CronCreateRequest),
      );
    }

    r.post("/runs/crons/search", { schema: { tags, body: SearchBody.default({ limit: 10, offset: 0 }) } }, async (req, reply) => {
      const { page, total } = await crons.search(callerOf(req), req.body);
      reply.headers(paginationHeaders(req.body.offset, page.length, total));
      const select = req.body.select;
      const now = ctx.now();
      return page.map((c) => pick(select?.includes("now") ? { ...c, now } : c, select));
    });

    r.post("/runs/crons/count", { schema: { tags, body: z.object(Filter).default({}) } }, async (req) => {
      return crons.count(callerOf(req), req.body);
    });

    r.patch("/runs/crons/:cron_id", { schema: { tags, params: CronParams, body: CronPatch } }, async (req) => {
      return crons.patch(callerOf(req), req.params.cron_id, req.body as CronPatchRequest);
    });

    r.delete("/runs/crons/:cron_id", { schema: { tags, params: CronParams } }, async (req, reply) => {
      await crons.delete(callerOf(req), req.params.cron_id);
      return reply.code(204).send();
    });
  };
}
