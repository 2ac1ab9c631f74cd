import type { FastifyPluginAsync } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import { z } from "zod";
import type { AppContext } from "../../app/context.js";
import { countThreads, createThread, getThread, patchThread, searchThreads, threadStateConsistent } from "../../app/threads.js";
import { authorize } from "../auth.js";
import { authorizeThread } from "../../app/auth/guards.js";
import { filterMatches } from "../../read-models/auth-filters.js";
import { HttpError } from "../errors.js";
import { ThreadStatusSchema } from "../../domain/threads.js";
import { pick } from "../../domain/json.js";
import { IfExists, JsonObject, Limit, Offset, SortOrder, ThreadIdParams, Uuid, paginationHeaders } from "../schemas.js";
import type { ThreadLifecycle } from "../../app/thread-lifecycle.js";
import { purgeVisibleThread } from "./audit.js";
import { isoOf } from "../../util/time.js";

const ThreadFields = ["thread_id", "created_at", "updated_at", "state_updated_at", "metadata", "config", "context", "status", "values", "interrupts", "error"] as const;

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

    r.post("/threads", { schema: { tags, body: CreateBody.default({}) } }, async (req) => {
      const { value, filters } = await authorize(req, "threads", "create", {
        thread_id: req.body.thread_id, metadata: req.body.metadata ?? {}, if_exists: req.body.if_exists ?? "raise",
      });
      // Someone else's thread with that id: a conflict, as for any existing thread (its content stays hidden).
      const existing = value.thread_id ? (await threadStateConsistent(ctx, value.thread_id))?.thread : undefined;
      if (existing && filters && !filterMatches(existing.metadata, filters)) throw new HttpError(409, `Thread with ID ${value.thread_id} already exists`);
      const thread = await createThread(ctx, {
        thread_id: value.thread_id, metadata: value.metadata ?? {}, if_exists: value.if_exists ?? "raise", expires_at: expiresAt(req.body.ttl, ctx.now()),
      });
      if (req.body.supersteps?.length) return lifecycle.applySupersteps(thread.thread_id, req.body.supersteps);
      return thread;
    });

    r.post("/threads/search", { schema: { tags, body: SearchBody.default({ limit: 10, offset: 0 }) } }, async (req, reply) => {
      const { filters } = await authorize(req, "threads", "search", { ...req.body });
      const { page, total } = await searchThreads(ctx, req.body, filters);
      reply.headers(paginationHeaders(req.body.offset, page.length, total));
      return page.map((t) => pick(t, req.body.select));
    });

    r.post("/threads/count", { schema: { tags, body: z.strictObject(Filters).default({}) } }, async (req) => {
      const { filters } = await authorize(req, "threads", "search", { ...req.body });
      return countThreads(ctx, req.body, filters);
    });

    r.get("/threads/:thread_id", { schema: { tags, params: ThreadIdParams, querystring: z.object({ include: z.unknown().optional() }) } }, async (req) => {
      await authorizeThread(ctx, req, "read", req.params.thread_id, { thread_id: req.params.thread_id });
      return getThread(ctx, req.params.thread_id);
    });

    r.patch(
      "/threads/:thread_id",
      { schema: { tags, params: ThreadIdParams, body: z.strictObject({ metadata: JsonObject.optional(), ttl: Ttl.optional() }) } },
      async (req) => {
        const { value } = await authorizeThread(ctx, req, "update", req.params.thread_id, { thread_id: req.params.thread_id, metadata: req.body.metadata ?? {} });
        return patchThread(ctx, req.params.thread_id, value.metadata ?? {}, expiresAt(req.body.ttl, ctx.now()));
      },
    );

    r.delete(
      "/threads/:thread_id",
      { schema: { tags, params: ThreadIdParams, querystring: z.object({ purge: z.enum(["true", "false"]).optional() }) } },
      async (req, reply) => {
        if (req.query.purge === "true") {
          // Purging also reaches deleted threads: their visibility is checked on the log (audit routes).
          await purgeVisibleThread(ctx, lifecycle, req, req.params.thread_id);
        } else {
          await authorizeThread(ctx, req, "delete", req.params.thread_id, { thread_id: req.params.thread_id });
          await lifecycle.delete(req.params.thread_id);
        }
        reply.code(204).send();
      },
    );

    r.post("/threads/:thread_id/copy", { schema: { tags, params: ThreadIdParams } }, async (req) => {
      // As the official server: copying needs read access; the copy keeps the source's metadata (its owner).
      await authorizeThread(ctx, req, "read", req.params.thread_id, { thread_id: req.params.thread_id });
      return lifecycle.copy(req.params.thread_id);
    });
  };
}
