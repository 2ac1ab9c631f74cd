import type { FastifyPluginAsync, FastifyRequest } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import { z } from "zod";
import { assertNamespace, itemToWire, type StoreService } from "../../app/store.js";
import type { AuthAction } from "../../app/auth/engine.js";
import type { AuthorizeResult } from "../../app/auth/engine.js";
import { authorize } from "../auth.js";
import { JsonObject, Offset } from "../schemas.js";

/**
 * The Store API (reference A.6): PUT/GET/DELETE /store/items, POST /store/items/search,
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

/**
 * The authorization seam of the store routes: runs the custom-auth handler for `store:<action>`
 * (`authorize` of src/http/auth.ts). As in the official servers, a store handler may rewrite
 * `value.namespace` (e.g. prepend the user's identity) or refuse; the routes then use the value
 * it returns. Filters are not a store concept there: any a handler returns are not applied.
 */
export async function storeAccess<V extends { namespace?: string[] | null }>(request: FastifyRequest, action: AuthAction<"store">, value: V): Promise<AuthorizeResult<V>> {
  const result = await authorize(request, "store", action, value);
  return { value: result.value, filters: undefined };
}

export function storeRoutes(service: StoreService): FastifyPluginAsync {
  return async (app) => {
    const r = app.withTypeProvider<ZodTypeProvider>();
    const tags = ["store"];

    r.put("/store/items", { schema: { tags, body: PutBody } }, async (req, reply) => {
      assertNamespace(req.body.namespace);
      const { value } = await storeAccess(req, "put", { namespace: req.body.namespace, key: req.body.key, value: req.body.value, index: req.body.index, ttl: req.body.ttl });
      await service.put({ namespace: value.namespace, key: value.key, value: value.value, index: value.index, ttl: value.ttl });
      reply.code(204).send();
    });

    r.get("/store/items", { schema: { tags, querystring: GetQuery } }, async (req, reply) => {
      const namespace = req.query.namespace ? req.query.namespace.split(".") : [];
      assertNamespace(namespace, { allowEmpty: true });
      const { value } = await storeAccess(req, "get", { namespace, key: req.query.key });
      assertNamespace(value.namespace, { allowEmpty: true });
      const item = await service.get(value.namespace, value.key, { refreshTtl: req.query.refresh_ttl });
      reply.type("application/json").send(JSON.stringify(item ? itemToWire(item) : null));
    });

    r.delete("/store/items", { schema: { tags, body: DeleteBody } }, async (req, reply) => {
      const namespace = req.body.namespace ?? [];
      assertNamespace(namespace, { allowEmpty: true });
      const { value } = await storeAccess(req, "delete", { namespace, key: req.body.key });
      assertNamespace(value.namespace, { allowEmpty: true });
      await service.delete(value.namespace, value.key);
      reply.code(204).send();
    });

    r.post("/store/items/search", { schema: { tags, body: SearchBody.default({ limit: 10, offset: 0 }) } }, async (req) => {
      const prefix = req.body.namespace_prefix ?? [];
      assertNamespace(prefix, { allowEmpty: true });
      const { value } = await storeAccess(req, "search", {
        namespace: prefix, filter: req.body.filter ?? undefined, limit: req.body.limit, offset: req.body.offset, query: req.body.query ?? undefined,
      });
      assertNamespace(value.namespace, { allowEmpty: true });
      const hits = await service.search({
        namespacePrefix: value.namespace, filter: value.filter, limit: value.limit, offset: value.offset, query: value.query,
        refreshTtl: req.body.refresh_ttl ?? undefined,
      });
      return { items: hits.map((h) => itemToWire(h.item, h.score)) };
    });

    r.post("/store/namespaces", { schema: { tags, body: NamespacesBody.default({ limit: 100, offset: 0 }) } }, async (req) => {
      if (req.body.prefix) assertNamespace(req.body.prefix, { allowEmpty: true });
      if (req.body.suffix) assertNamespace(req.body.suffix, { allowEmpty: true });
      const { value } = await storeAccess(req, "list_namespaces", {
        namespace: req.body.prefix ?? undefined, suffix: req.body.suffix ?? undefined, max_depth: req.body.max_depth ?? undefined, limit: req.body.limit, offset: req.body.offset,
      });
      if (value.namespace) assertNamespace(value.namespace, { allowEmpty: true });
      return { namespaces: service.listNamespaces({ prefix: value.namespace, suffix: value.suffix, maxDepth: value.max_depth, limit: value.limit, offset: value.offset }) };
    });
  };
}
