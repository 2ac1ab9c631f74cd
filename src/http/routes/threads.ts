import type { FastifyPluginAsync } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import * as z from "zod";
import type { AppContext } from "../../app/context.js";
import { ThreadsAccess } from "../../app/threads-access.js";
import { callerOf } from "../auth.js";
import { ThreadStatusSchema } from "../../domain/threads.js";
import { pick } from "../../domain/json.js";
import { IfExists, JsonObject, Limit, Offset, SortOrder, ThreadIdParams, Uuid, paginationHeaders } from "../schemas.js";
import type { ThreadLifecycle } from "../../app/thread-lifecycle.js";
import { purgeVisibleThread } from "../../app/audit.js";
import { isoOf } from "../../util/time.js";

const ThreadFields = [
  "thread_id",
  "created_at",
  "updated_at",
  "state_updated_at",
  "metadata",
  "config",
  "context",
  "status",
  "values",
  "interrupts",
  "error",
] as const;

/** Time-to-live in minutes as the SDK sends it (a number, or `{ttl, strategy}`): the TTL sweeper deletes the thread then. */
const Ttl = z.union([
  z.number().positive(),
  z.object({ ttl: z.number().positive(), strategy: z.literal("delete", { error: 'only "delete" is supported for threads' }).optional() }),
]);

/** When a thread with this TTL expires, from `now` (ISO 8601, the server's format). */
function expiresAt(ttl: z.infer<typeof Ttl> | undefined, now: string): string | undefined {
  if (ttl === undefined) return undefined;
  const minutes = typeof ttl === "number" ? ttl : ttl.ttl;
  return isoOf(Date.parse(now) + minutes * 60_000);
}

export const SuperstepSchema = z.strictObject({
  updates: z.array(z.strictObject({ values: z.unknown().optional(), command: z.unknown().optional(), as_node: z.string() })).min(1),
});

const CreateBody = z.strictObject({
  thread_id: Uuid.optional(),
  metadata: JsonObject.optional(),
  if_exists: IfExists.optional(),
  supersteps: z.array(SuperstepSchema).optional(),
  ttl: Ttl.optional(),
});

const Filters = {
  metadata: JsonObject.optional(),
  values: JsonObject.optional(),
  status: ThreadStatusSchema.optional(),
};

const SearchBody = z.strictObject({
  ...Filters,
  ids: z.array(Uuid).optional(),
  limit: Limit,
  offset: Offset,
  sort_by: z.enum(["thread_id", "status", "created_at", "updated_at", "state_updated_at"]).optional(),
  sort_order: SortOrder.optional(),
  select: z.array(z.enum(ThreadFields)).optional(),
  extract: JsonObject.optional(),
});

export function threadRoutes(ctx: AppContext, lifecycle: ThreadLifecycle): FastifyPluginAsync {
  return async (app) => {
    const r = app.withTypeProvider<ZodTypeProvider>();
    const tags = ["threads"];
    const threads = new ThreadsAccess(ctx, lifecycle);

    r.post("/threads", { schema: { tags, body: CreateBody.default({}) } }, async (req) => {
      const { ttl, ...body } = req.body;
      return threads.create(callerOf(req), { ...body, expires_at: expiresAt(ttl, ctx.now()) });
    });

    r.post("/threads/search", { schema: { tags, body: SearchBody.default({ limit: 10, offset: 0 }) } }, async (req, reply) => {
      const { page, total } = await threads.search(callerOf(req), req.body);
      reply.headers(paginationHeaders(req.body.offset, page.length, total));
      return page.map((t) => pick(t, req.body.select));
    });

    r.post("/threads/count", { schema: { tags, body: z.strictObject(Filters).default({}) } }, async (req) => threads.count(callerOf(req), req.body));

    r.get("/threads/:thread_id", { schema: { tags, params: ThreadIdParams, querystring: z.object({ include: z.unknown().optional() }) } }, async (req) =>
      threads.get(callerOf(req), req.params.thread_id),
    );

    r.patch(
      "/threads/:thread_id",
      { schema: { tags, params: ThreadIdParams, body: z.strictObject({ metadata: JsonObject.optional(), ttl: Ttl.optional() }) } },
      async (req) => threads.patch(callerOf(req), req.params.thread_id, req.body.metadata, expiresAt(req.body.ttl, ctx.now())),
    );

    r.delete(
      "/threads/:thread_id",
      { schema: { tags, params: ThreadIdParams, querystring: z.object({ purge: z.enum(["true", "false"]).optional() }) } },
      async (req, reply) => {
        // Purging also reaches deleted threads: their visibility is checked on the log (audit).
        if (req.query.purge === "true") await purgeVisibleThread(ctx, lifecycle, callerOf(req), req.params.thread_id);
        else await threads.delete(callerOf(req), req.params.thread_id);
        return reply.code(204).send();
      },
    );

    r.post(
      "/threads/prune",
      { schema: { tags, body: z.strictObject({ thread_ids: z.array(Uuid), strategy: z.enum(["delete", "keep_latest"]).default("delete") }) } },
      async (req) => threads.prune(callerOf(req), req.body.thread_ids, req.body.strategy),
    );

    r.post("/threads/:thread_id/copy", { schema: { tags, params: ThreadIdParams } }, async (req) => threads.copy(callerOf(req), req.params.thread_id));
  };
}
