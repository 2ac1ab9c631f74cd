import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest, type HTTPMethods, type RouteOptions } from "fastify";
import { jsonSchemaTransform } from "fastify-type-provider-zod";
import { VERSION } from "../version.js";
import { useZodCompilers, zodSchemaController } from "./zod-compilers.js";

/** A route as the OpenAPI document describes it. */
interface RouteShape {
  method: HTTPMethods | HTTPMethods[];
  url: string;
  schema: RouteOptions["schema"];
}

/**
 * `/openapi.json` and `/docs`, built from the route schemas on first request. @fastify/swagger and
 * @fastify/swagger-ui (with yaml, a static file server and their schema resolvers) are many modules to
 * load at start-up; here they load only when someone reads the docs. The routes are recorded as they are
 * registered (an `onRoute` hook: a cheap copy of method, url and schema) and replayed, with no
 * handlers, into a separate Fastify instance that carries the two plugins; `/docs` requests are
 * forwarded to it.
 */
export function lazyApiDocs(app: FastifyInstance): void {
  const routes: RouteShape[] = [];
  app.addHook("onRoute", (route) => {
    // Fastify's automatic HEAD twin of each GET, and our own documentation routes, are not documented.
    if (route.method === "HEAD" || route.url === "/openapi.json" || route.url.startsWith("/docs")) return;
    routes.push({ method: route.method, url: route.url, schema: route.schema });
  });
  let docsApp: Promise<FastifyInstance> | undefined;
  const docs = () =>
    (docsApp ??= buildDocsApp(routes).catch((error: unknown) => {
      docsApp = undefined; // a later request tries again
      throw error;
    }));
  app.get("/openapi.json", { schema: { hide: true } }, async () => (await docs()).swagger());
  const forward = async (request: FastifyRequest, reply: FastifyReply) => {
    const answer = await (await docs()).inject({ method: "GET", url: request.url, headers: { accept: request.headers.accept ?? "*/*" } });
    reply.code(answer.statusCode);
    for (const [name, value] of Object.entries(answer.headers)) {
      if (value !== undefined && !["content-length", "connection", "transfer-encoding", "date", "keep-alive"].includes(name)) reply.header(name, value);
    }
    return reply.send(answer.rawPayload);
  };
  app.get("/docs", { schema: { hide: true } }, forward);
  app.get("/docs/*", { schema: { hide: true } }, forward);
}

async function buildDocsApp(routes: readonly RouteShape[]): Promise<FastifyInstance> {
  const [{ default: fastifySwagger }, { default: fastifySwaggerUi }] = await Promise.all([import("@fastify/swagger"), import("@fastify/swagger-ui")]);
  const docs = Fastify({ logger: false, schemaController: zodSchemaController });
  useZodCompilers(docs);
  await docs.register(fastifySwagger, {
    openapi: {
      openapi: "3.1.0",
      info: { title: "Agent Server", description: "Event-sourced LangGraph-compatible Agent Server", version: VERSION },
      components: {
        securitySchemes: { apiKey: { type: "apiKey", in: "header", name: "x-api-key" } },
      },
    },
    transform: jsonSchemaTransform,
  });
  await docs.register(fastifySwaggerUi, { routePrefix: "/docs" });
  const unused = async () => undefined;
  for (const route of routes) docs.route({ method: route.method, url: route.url, schema: route.schema, exposeHeadRoute: false, handler: unused });
  await docs.ready();
  return docs;
}
