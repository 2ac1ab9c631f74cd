import type { FastifyPluginAsync } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import * as z from "zod";
import { itemToWire, type StoreService } from "../../app/store.js";
import { StoreAccess } from "../../app/store-access.js";
import { callerOf } from "../auth.js";
import { JsonObject, Offset } from "../schemas.js";

/**
 * The Store API: PUT/GET/DELETE /store/items, POST /store/items/search,
 * POST /store/namespaces. Namespaces are checked as the official server does (422
 * `Namespace labels cannot be empty or contain periods. Received: a.b`).
 */

const Namespace = z.array(z.string());
const Ttl = z.number().positive().nullable();
const QueryBool = z.enum(["true", "false", "1", "0"]).transform((v) => v === "true" || v === "1");

const PutBody = z.strictObject({
  namespace: Namespace,
  key: z.string(),
  value: JsonObject,
  index: z.union([z.literal(false), z.array(z.string()), z.null()]).optional(),
  ttl: Ttl.optional(),
});

const GetQuery = z.object({
  /** Labels joined with `.` (`a.b`); absent or empty = the empty namespace. */
  namespace: z.string().optional(),
  key: z.string(),
  refresh_ttl: QueryBool.optional(),
});

const DeleteBody = z.strictObject({ namespace: Namespace.optional(), key: z.string() });

const SearchBody = z.strictObject({
  namespace_prefix: Namespace.nullish(),
  filter: JsonObject.nullish(),
  limit: z.number().int().min(1).max(1000).default(10),
  offset: Offset,
  query: z.string().nullish(),
  refresh_ttl: z.boolean().nullish(),
});

const NamespacesBody = z.strictObject({
  prefix: Namespace.nullish(),
  suffix: Namespace.nullish(),
  max_depth: z.number().int().positive().nullish(),
  limit: z.number().int().min(1).max(1000).default(100),
  offset: Offset,
});

export function storeRoutes(service: StoreService): FastifyPluginAsync {
  const store = new StoreAccess(service);
  return async (app) => {
    const r = app.withTypeProvider<ZodTypeProvider>();
    const tags = ["store"];

    r.put("/store/items", { schema: { tags, body: PutBody } }, async (req, reply) => {
      const { namespace, key, value, index, ttl } = req.body;
      await store.put(callerOf(req), { namespace, key, value, index, ttl });
      return reply.code(204).send();
    });

    r.get("/store/items", { schema: { tags, querystring: GetQuery } }, async (req, reply) => {
      const namespace = req.query.namespace ? req.query.namespace.split(".") : [];
      const item = await store.get(callerOf(req), namespace, req.query.key, { refreshTtl: req.query.refresh_ttl });
      return reply.type("application/json").send(JSON.stringify(item ? itemToWire(item) : null));
    });

    r.delete("/store/items", { schema: { tags, body: DeleteBody } }, async (req, reply) => {
      await store.delete(callerOf(req), req.body.namespace ?? [], req.body.key);
      return reply.code(204).send();
    });

    r.post("/store/items/search", { schema: { tags, body: SearchBody.default({ limit: 10, offset: 0 }) } }, async (req) => {
      const hits = await store.search(callerOf(req), {
        namespace: req.body.namespace_prefix ?? [],
        filter: req.body.filter ?? undefined,
        limit: req.body.limit,
        offset: req.body.offset,
        query: req.body.query ?? undefined,
        refreshTtl: req.body.refresh_ttl ?? undefined,
      });
      return { items: hits.map((h) => itemToWire(h.item, h.score)) };
    });

    r.post("/store/namespaces", { schema: { tags, body: NamespacesBody.default({ limit: 100, offset: 0 }) } }, async (req) => ({
      namespaces: await store.listNamespaces(callerOf(req), {
        namespace: req.body.prefix ?? undefined,
        suffix: req.body.suffix ?? undefined,
        max_depth: req.body.max_depth ?? undefined,
        limit: req.body.limit,
        offset: req.body.offset,
      }),
    }));
  };
}
