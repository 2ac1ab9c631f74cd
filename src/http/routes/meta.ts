import type { FastifyPluginAsync } from "fastify";
import * as z from "zod";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import { VERSION } from "../../version.js";
import type { LogHealth } from "../../eventstore/log-health.js";
import { healthReport, LogReportSchema, okAnswer, QuarantineReportSchema, quarantineReport } from "../log-health-report.js";

export interface MetaInfo {
  storeKind: "sqlite" | "esdb";
  langgraphJsVersion: string;
  webhooksEnabled: boolean;
  /** The log's head and each read model's position (what /info reports for operators). */
  positions?: () => Promise<{ head: bigint; projections: { name: string; position: bigint }[] }>;
  /** The link to the log as the store and the read models report it (/ok, /info). */
  health?: LogHealth;
  /** One round trip to the log (`/ok?check_db=1`); rejects when it cannot be made within the deadline. */
  checkLog?: () => Promise<unknown>;
  /** Whether the graphs and the run worker are loaded yet (they load after the server listens). */
  graphRuntime?: () => "loading" | "ready";
  /** What the subscribers of the log quarantined (counts by subscriber), reported by /ok. */
  quarantine?: () => { entries: number; by_subscriber: Record<string, number> };
}

const InfoSchema = z.object({
  version: z.string(),
  langgraph_js_version: z.string(),
  context: z.literal("js"),
  store: z.object({ kind: z.enum(["sqlite", "esdb"]), head_position: z.string().optional() }),
  projections: z.array(z.object({ name: z.string(), position: z.string() })).optional(),
  flags: z.object({ assistants: z.boolean(), crons: z.boolean(), langsmith: z.boolean(), webhooks: z.boolean() }),
  log: LogReportSchema.optional(),
  graph_runtime: z.enum(["loading", "ready"]).optional(),
});

const OkQuery = z.object({ check_db: z.string().optional() });
const OkAnswer = z.object({ ok: z.boolean(), reason: z.string().optional(), quarantine: QuarantineReportSchema.optional() });

/** Liveness and server facts; both stay public when an API key is required. */
export function metaRoutes(info: MetaInfo): FastifyPluginAsync {
  return async (app) => {
    const r = app.withTypeProvider<ZodTypeProvider>();
    // 503 while this process cannot serve writes, so that a load balancer sends the traffic elsewhere.
    r.get("/ok", { schema: { querystring: OkQuery, response: { 200: OkAnswer, 503: OkAnswer } } }, async (request, reply) => {
      const answer = await okAnswer(info.health, request.query.check_db, info.checkLog, info.quarantine && (() => quarantineReport(info.quarantine!())));
      return reply.code(answer.ok ? 200 : 503).send(answer);
    });
    r.get("/info", { schema: { response: { 200: InfoSchema } } }, async () => {
      // The head is read from the log: not while it is known to be unreachable (/info answers at once).
      const reachable = info.health?.state !== "disconnected";
      const positions = reachable ? await info.positions?.().catch(() => undefined) : undefined;
      return {
        version: VERSION,
        langgraph_js_version: info.langgraphJsVersion,
        context: "js" as const,
        store: { kind: info.storeKind, ...(positions ? { head_position: String(positions.head) } : {}) },
        ...(positions ? { projections: positions.projections.map((p) => ({ name: p.name, position: String(p.position) })) } : {}),
        flags: { assistants: true, crons: true, langsmith: false, webhooks: info.webhooksEnabled },
        ...(info.health ? { log: healthReport(info.health, positions?.head) } : {}),
        ...(info.graphRuntime ? { graph_runtime: info.graphRuntime() } : {}),
      };
    });
  };
}
