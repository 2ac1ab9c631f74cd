import type { FastifyPluginAsync } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import * as z from "zod";
import { readFileSync } from "node:fs";
import type { AppContext } from "../../app/context.js";
import { eventJson, filterHistory } from "../../app/thread-history.js";
import { logPointParam, replayFromLog, visibleHistory } from "../../app/audit.js";
import { callerOf } from "../auth.js";
import { HttpError } from "../errors.js";
import { ThreadIdParams, Uuid } from "../schemas.js";

const Bool = z.enum(["true", "false"]).transform((v) => v === "true");
const Position = z.string().regex(/^\d{1,19}$/, "expected a log position (a non-negative integer)");
const Incarnation = z.coerce.number().int().min(1);

const EventsQuery = z.object({
  after: Position.optional(),
  limit: z.coerce.number().int().min(1).max(1000).optional(),
  /** Comma-separated event types. */
  types: z.string().min(1).optional(),
  run_id: Uuid.optional(),
  include_output: Bool.optional(),
  /** One incarnation of the id (1 for its first creation, then 2, ...). */
  incarnation: Incarnation.optional(),
});

const ReplayQuery = z.object({ at: z.string().optional(), diff: z.string().optional(), incarnation: Incarnation.optional() });

/** Beside this module when run from source; from dist/main.js (the bundle), in the source tree. */
const AUDIT_PAGE_CANDIDATES = [new URL("../audit-page/index.html", import.meta.url), new URL("../src/http/audit-page/index.html", import.meta.url)];

function readAuditPage(): string {
  for (const url of AUDIT_PAGE_CANDIDATES) {
    try {
      return readFileSync(url, "utf8");
    } catch {
      // next candidate
    }
  }
  throw new HttpError(500, "the audit page is missing from this installation");
}

/** Auditors: a thread's history and replay from the log, and the /audit page that shows them. */
export function auditRoutes(ctx: AppContext): FastifyPluginAsync {
  return async (app) => {
    const r = app.withTypeProvider<ZodTypeProvider>();
    const tags = ["audit"];
    let page: string | undefined;

    r.get("/threads/:thread_id/events", { schema: { tags, params: ThreadIdParams, querystring: EventsQuery } }, async (req, reply) => {
      const q = req.query;
      const view = await visibleHistory(ctx, callerOf(req), req.params.thread_id, "read", q.incarnation);
      const ndjson = (req.headers.accept ?? "").includes("application/x-ndjson");
      const events = filterHistory(view.events, {
        after: q.after === undefined ? undefined : BigInt(q.after),
        limit: q.limit ?? (ndjson ? undefined : 100),
        types: q.types
          ?.split(",")
          .map((t) => t.trim())
          .filter(Boolean),
        runId: q.run_id,
        includeOutput: q.include_output ?? false,
      });
      const json = (e: (typeof events)[number]) => eventJson(e, view.numberOf(e));
      if (ndjson) {
        reply.type("application/x-ndjson");
        return events.map((e) => JSON.stringify(json(e)) + "\n").join("");
      }
      return events.map(json);
    });

    r.get("/threads/:thread_id/replay", { schema: { tags, params: ThreadIdParams, querystring: ReplayQuery } }, async (req) => {
      const at = logPointParam("at", req.query.at);
      const since = logPointParam("diff", req.query.diff);
      const view = await visibleHistory(ctx, callerOf(req), req.params.thread_id, "read", req.query.incarnation);
      return replayFromLog(ctx.store, req.params.thread_id, at, since, view);
    });

    // The page is static (no build step): it calls the JSON endpoints above with the user's key.
    r.get("/audit", { schema: { hide: true } }, async (_req, reply) => {
      page ??= readAuditPage();
      reply.type("text/html; charset=utf-8").header("Cache-Control", "no-store");
      return page;
    });
  };
}
