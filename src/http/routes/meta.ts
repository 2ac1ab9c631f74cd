import type { FastifyPluginAsync } from "fastify";
import { z } from "zod";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import { VERSION } from "../../version.js";

export interface MetaInfo {
  storeKind: "sqlite" | "esdb";
  langgraphJsVersion: string;
  webhooksEnabled: boolean;
}

const InfoSchema = z.object({
  version: z.string(),
  langgraph_js_version: z.string(),
  context: z.literal("js"),
  store: z.object({ kind: z.enum(["sqlite", "esdb"]) }),
  flags: z.object({ assistants: z.boolean(), crons: z.boolean(), langsmith: z.boolean(), webhooks: z.boolean() }),
});

/** Liveness and server facts; both stay public when an API key is required. */
export function metaRoutes(info: MetaInfo): FastifyPluginAsync {
  return async (app) => {
    const r = app.withTypeProvider<ZodTypeProvider>();
    r.get("/ok", { schema: { response: { 200: z.object({ ok: z.literal(true) }) } } }, async () => ({ ok: true as const }));
    r.get("/info", { schema: { response: { 200: InfoSchema } } }, async () => ({
      version: VERSION,
      langgraph_js_version: info.langgraphJsVersion,
      context: "js" as const,
      store: { kind: info.storeKind },
      flags: { assistants: true, crons: true, langsmith: false, webhooks: info.webhooksEnabled },
    }));
  };
}
