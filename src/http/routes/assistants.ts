import type { FastifyPluginAsync, FastifyRequest } from "fastify";
import { callerOf } from "../auth.js";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import * as z from "zod";
import type { AppContext } from "../../app/context.js";
import { AssistantsAccess } from "../../app/assistants-access.js";
import { pick } from "../../domain/json.js";
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
    const assistants = new AssistantsAccess(ctx, lifecycle);

    r.post("/assistants", { schema: { tags, body: CreateBody } }, async (req) => assistants.create(callerOf(req), req.body));

    r.post("/assistants/search", { schema: { tags, body: SearchBody.default({ limit: 10, offset: 0 }) } }, async (req, reply) => {
      const { page, total } = await assistants.search(callerOf(req), req.body);
      reply.headers(paginationHeaders(req.body.offset, page.length, total));
      return page.map((a) => pick(a, req.body.select));
    });

    r.post("/assistants/count", { schema: { tags, body: z.strictObject(Filters).default({}) } }, async (req) => assistants.count(callerOf(req), req.body));

    r.get("/assistants/:assistant_id", { schema: { tags, params: AssistantIdParams } }, async (req) => assistants.get(callerOf(req), req.params.assistant_id));

    r.patch("/assistants/:assistant_id", { schema: { tags, params: AssistantIdParams, body: PatchBody } }, async (req) =>
      assistants.patch(callerOf(req), req.params.assistant_id, req.body),
    );

    r.delete(
      "/assistants/:assistant_id",
      { schema: { tags, params: AssistantIdParams, querystring: z.object({ delete_threads: z.enum(["true", "false"]).optional() }) } },
      async (req, reply) => {
        await assistants.delete(callerOf(req), req.params.assistant_id, req.query.delete_threads === "true");
        return reply.code(204).send();
      },
    );

    r.post(
      "/assistants/:assistant_id/versions",
      {
        schema: {
          tags,
          params: AssistantIdParams,
          body: z.strictObject({ metadata: JsonObject.optional(), limit: Limit, offset: Offset }).default({ limit: 10, offset: 0 }),
        },
      },
      async (req) => assistants.versions(callerOf(req), req.params.assistant_id, req.body),
    );

    const Bool = z.enum(["true", "false", "1", "0"]).transform((v) => v === "true" || v === "1");
    const graphConfig = (req: FastifyRequest) => assistants.graphConfig(callerOf(req), (req.params as { assistant_id: string }).assistant_id);

    r.get(
      "/assistants/:assistant_id/graph",
      {
        schema: {
          tags,
          params: AssistantIdParams,
          querystring: z.object({ xray: z.union([Bool, z.coerce.number().int().min(0)]).optional() }),
        },
      },
      async (req) => {
        const { graphId, config } = await graphConfig(req);
        return (await ctx.runtime()).graphs.drawable(graphId, { config, xray: req.query.xray });
      },
    );

    r.get("/assistants/:assistant_id/schemas", { schema: { tags, params: AssistantIdParams } }, async (req) => {
      const { graphId, config } = await graphConfig(req);
      return (await ctx.runtime()).graphs.schemas(graphId, { config });
    });

    const SubgraphQuery = z.object({ recurse: Bool.optional() });
    r.get("/assistants/:assistant_id/subgraphs", { schema: { tags, params: AssistantIdParams, querystring: SubgraphQuery } }, async (req) => {
      const { graphId, config } = await graphConfig(req);
      return (await ctx.runtime()).graphs.subgraphs(graphId, { config, recurse: req.query.recurse });
    });

    r.get(
      "/assistants/:assistant_id/subgraphs/:namespace",
      { schema: { tags, params: AssistantIdParams.extend({ namespace: z.string().min(1) }), querystring: SubgraphQuery } },
      async (req) => {
        const { graphId, config } = await graphConfig(req);
        return (await ctx.runtime()).graphs.subgraphs(graphId, { config, namespace: req.params.namespace, recurse: req.query.recurse });
      },
    );

    r.post(
      "/assistants/:assistant_id/latest",
      { schema: { tags, params: AssistantIdParams, body: z.strictObject({ version: z.number().int().positive() }) } },
      async (req) => {
        return assistants.setLatest(callerOf(req), req.params.assistant_id, req.body.version);
      },
    );
  };
}
