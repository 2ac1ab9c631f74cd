import type { FastifyPluginAsync } from "fastify";
import { z } from "zod";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import { VERSION } from "../../version.js";

export interface MetaInfo {
  storeKind: "sqlite" | "esdb";
  langgraphJsVersion: string;
  webhooksEnabled: boolean;
  /** The log's head and each read model's position (what /info reports for operators). */
  positions?: () => Promise<{ head: bigint; projections: { name: string; position: bigint }[] }>;
}

const InfoSchema = z.object({
  version: z.string(),
  langgraph_js_version: z.string(),
  context: z.literal("js"),
  store: z.object({ kind: z.enum(["sqlite", "esdb"]), head_position: z.string().optional() }),
  projections: z.array(z.object({ name: z.string(), position: z.string() })).optional(),
  flags: z.object({ assistants: z.boolean(), crons: z.boolean(), langsmith: z.boolean(), webhooks: z.boolean() }),
});

/** Liveness and server facts; both stay public when an API key is required. */
export function metaRoutes(info: MetaInfo): FastifyPluginAsync {
  return async (app) => {
    const r = app.withTypeProvider<ZodTypeProvider>();
    r.get("/ok", { schema: { response: { 200: z.object({ ok: z.literal(true) }) } } }, async () => ({ ok: true as const }));
    r.get("/info", { schema: { response: { 200: InfoSchema } } }, async () => {
      const positions = await info.positions?.();
      return {
        version: VERSION,
        langgraph_js_version: info.langgraphJsVersion,
        context: "js" as const,
        store: { kind: info.storeKind, ...(positions ? { head_position: String(positions.head) } : {}) },
        ...(positions ? { projections: positions.projections.map((p) => ({ name: p.name, position: String(p.position) })) } : {}),
        flags: { assistants: true, crons: true, langsmith: false, webhooks: info.webhooksEnabled },
      };
    });
  };
}
