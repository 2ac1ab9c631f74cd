import type { FastifyPluginAsync, FastifyRequest } from "fastify";
import type { AuthAction } from "../../app/auth/engine.js";
import { callerOf } from "../auth.js";
import { authorize } from "../../app/auth/caller.js";
import { authorizeAssistant } from "../../app/auth/guards.js";
import { filterMatches } from "../../read-models/auth-filters.js";
import { HttpError } from "../errors.js";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import { z } from "zod";
import type { AppContext } from "../../app/context.js";
import {
  assistantVersions,
  createAssistant,
  deleteAssistant,
  getAssistant,
  countAssistants,
  patchAssistant,
  searchAssistants,
  setLatestVersion,
  findAssistantConsistent,
  resolveAssistantId,
} from "../../app/assistants.js";
import { pick } from "../../domain/json.js";
import { searchThreads } from "../../app/threads.js";
import type { ThreadLifecycle } from "../../app/thread-lifecycle.js";
import { IfExists, JsonObject, Limit, Offset, RunnableConfig, SortOrder, Uuid, paginationHeaders } from "../schemas.js";

const AssistantIdParams = z.object({ assistant_id: z.string().min(1) });
const AssistantFields = ["assistant_id", "graph_id", "name", "description", "config", "context", "created_at", "updated_at", "metadata", "version"] as const;

const CreateBody = z.strictObject({
  graph_id: z.string().min(1),
  assistant_id: Uuid.optional(),
  config: RunnableConfig.optional(),
  context: JsonObject.optional(),
  metadata: JsonObject.optional(),
  if_exists: IfExists.optional(),
  name: z.string().optional(),
  description: z.string().nullable().optional(),
});

const PatchBody = z.strictObject({
  graph_id: z.string().min(1).optional(),
  config: RunnableConfig.optional(),
  context: JsonObject.optional(),
  metadata: JsonObject.optional(),
  name: z.string().optional(),
  description: z.string().nullable().optional(),
});

const Filters = {
  metadata: JsonObject.optional(),
  graph_id: z.string().optional(),
  name: z.string().optional(),
};

const SearchBody = z.strictObject({
  ...Filters,
  limit: Limit,
  offset: Offset,
  sort_by: z.enum(["assistant_id", "graph_id", "name", "created_at", "updated_at"]).optional(),
  sort_order: SortOrder.optional(),
  select: z.array(z.enum(AssistantFields)).optional(),
});

export function assistantRoutes(ctx: AppContext, lifecycle: ThreadLifecycle): FastifyPluginAsync {
  return async (app) => {
    const r = app.withTypeProvider<ZodTypeProvider>();
    const tags = ["assistants"];

    r.post("/assistants", { schema: { tags, body: CreateBody } }, async (req) => {
      const { value, filters } = await authorize(callerOf(req), "assistants", "create", {
        graph_id: req.body.graph_id,
        assistant_id: req.body.assistant_id,
        config: req.body.config ?? {},
        context: req.body.context ?? {},
        metadata: req.body.metadata ?? {},
        name: req.body.name ?? "Untitled",
        description: req.body.description ?? null,
        if_exists: req.body.if_exists ?? "raise",
      });
      // Someone else's assistant with that id: a conflict (its content stays hidden).
      const existing = value.assistant_id ? await findAssistantConsistent(ctx, value.assistant_id.toLowerCase()) : undefined;
      if (existing && filters && !filterMatches(existing.metadata, filters)) throw new HttpError(409, "Assistant already exists");
      return createAssistant(ctx, { ...value, config: value.config ?? {}, context: value.context ?? {}, metadata: value.metadata ?? {} });
    });

    r.post("/assistants/search", { schema: { tags, body: SearchBody.default({ limit: 10, offset: 0 }) } }, async (req, reply) => {
      const { filters } = await authorize(callerOf(req), "assistants", "search", { ...req.body });
      const { page, total } = searchAssistants(ctx, req.body, filters);
      reply.headers(paginationHeaders(req.body.offset, page.length, total));
      return page.map((a) => pick(a, req.body.select));
    });

    r.post("/assistants/count", { schema: { tags, body: z.strictObject(Filters).default({}) } }, async (req) => {
      const { filters } = await authorize(callerOf(req), "assistants", "search", { ...req.body });
      return countAssistants(ctx, req.body, filters);
    });

    /** `assistants:<action>` on the assistant of the path; 404 when it is not visible. */
    const guard = <V extends { assistant_id: string }>(req: FastifyRequest, action: AuthAction<"assistants">, value: V) =>
      authorizeAssistant(ctx, callerOf(req), action, value.assistant_id, value);
    const idOf = (req: FastifyRequest) => ({ assistant_id: (req.params as { assistant_id: string }).assistant_id });

    r.get("/assistants/:assistant_id", { schema: { tags, params: AssistantIdParams } }, async (req) => {
      await guard(req, "read", idOf(req));
      return getAssistant(ctx, req.params.assistant_id);
    });

    r.patch("/assistants/:assistant_id", { schema: { tags, params: AssistantIdParams, body: PatchBody } }, async (req) => {
      const { value } = await guard(req, "update", { ...idOf(req), ...req.body });
      const { assistant_id: _id, ...patch } = value;
      return patchAssistant(ctx, req.params.assistant_id, patch);
    });

    r.delete(
      "/assistants/:assistant_id",
      { schema: { tags, params: AssistantIdParams, querystring: z.object({ delete_threads: z.enum(["true", "false"]).optional() }) } },
      async (req, reply) => {
        await guard(req, "delete", idOf(req));
        // Only the threads this user may delete go with it.
        const threadFilters = req.query.delete_threads === "true"
          ? (await authorize(callerOf(req), "threads", "delete", { metadata: { assistant_id: resolveAssistantId(ctx, req.params.assistant_id) } })).filters
          : undefined;
        const assistantId = await deleteAssistant(ctx, req.params.assistant_id);
        if (req.query.delete_threads === "true") {
          // Threads the assistant ran on carry its id in their metadata (stamped at run creation).
          // Each delete takes the thread out of the search, so the next page starts after the ones kept.
          let kept = 0;
          for (;;) {
            const { page } = await searchThreads(ctx, { metadata: { assistant_id: assistantId }, limit: 100, offset: kept }, threadFilters);
            if (page.length === 0) break;
            for (const thread of page) {
              if (filterMatches(thread.metadata, threadFilters)) await lifecycle.delete(thread.thread_id);
              else kept++;
            }
          }
        }
        reply.code(204).send();
      },
    );

    r.post(
      "/assistants/:assistant_id/versions",
      {
        schema: {
          tags, params: AssistantIdParams,
          body: z.strictObject({ metadata: JsonObject.optional(), limit: Limit, offset: Offset }).default({ limit: 10, offset: 0 }),
        },
      },
      async (req) => {
        await guard(req, "read", idOf(req));
        return assistantVersions(ctx, req.params.assistant_id, req.body);
      },
    );

    const Bool = z.enum(["true", "false", "1", "0"]).transform((v) => v === "true" || v === "1");
    const graphConfig = async (req: FastifyRequest) => {
      await guard(req, "read", idOf(req));
      const a = await getAssistant(ctx, idOf(req).assistant_id);
      return { graphId: a.graph_id, config: { ...a.config, configurable: { ...(a.config.configurable as object), ...a.context } } };
    };

    r.get(
      "/assistants/:assistant_id/graph",
      {
        schema: {
          tags, params: AssistantIdParams,
          querystring: z.object({ xray: z.union([Bool, z.coerce.number().int().min(0)]).optional() }),
        },
      },
      async (req) => {
        const { graphId, config } = await graphConfig(req);
        return ctx.graphs.drawable(graphId, { config, xray: req.query.xray });
      },
    );

    r.get("/assistants/:assistant_id/schemas", { schema: { tags, params: AssistantIdParams } }, async (req) => {
      const { graphId, config } = await graphConfig(req);
      return ctx.graphs.schemas(graphId, { config });
    });

    const SubgraphQuery = z.object({ recurse: Bool.optional() });
    r.get("/assistants/:assistant_id/subgraphs", { schema: { tags, params: AssistantIdParams, querystring: SubgraphQuery } }, async (req) => {
      const { graphId, config } = await graphConfig(req);
      return ctx.graphs.subgraphs(graphId, { config, recurse: req.query.recurse });
    });

    r.get(
      "/assistants/:assistant_id/subgraphs/:namespace",
      { schema: { tags, params: AssistantIdParams.extend({ namespace: z.string().min(1) }), querystring: SubgraphQuery } },
      async (req) => {
        const { graphId, config } = await graphConfig(req);
        return ctx.graphs.subgraphs(graphId, { config, namespace: req.params.namespace, recurse: req.query.recurse });
      },
    );

    r.post(
      "/assistants/:assistant_id/latest",
      { schema: { tags, params: AssistantIdParams, body: z.strictObject({ version: z.number().int().positive() }) } },
      async (req) => {
        await guard(req, "update", { ...idOf(req), version: req.body.version });
        return setLatestVersion(ctx, req.params.assistant_id, req.body.version);
      },
    );
  };
}
