import type { FastifyPluginAsync } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import * as z from "zod";
import type { AppContext } from "../../app/context.js";
import { getThreadHistory, getThreadState, updateThreadState } from "../../app/thread-state.js";
import { JsonObject, ThreadIdParams } from "../schemas.js";
import { callerOf } from "../auth.js";

const CheckpointRef = z.strictObject({
  checkpoint_id: z.string().optional(),
  checkpoint_ns: z.string().optional(),
  checkpoint_map: JsonObject.nullable().optional(),
  thread_id: z.string().optional(),
});
const Bool = z.enum(["true", "false", "1", "0"]).transform((v) => v === "true" || v === "1");

const HistoryBody = z.strictObject({
  limit: z.number().int().min(1).max(1000).default(10),
  // The JS server takes a checkpoint id, the Python server a checkpoint object, the JS SDK a config.
  before: z
    .union([
      z.string().transform((id) => ({ checkpoint_id: id })),
      CheckpointRef,
      z.strictObject({ configurable: CheckpointRef }).transform((c) => c.configurable),
    ])
    .optional(),
  metadata: JsonObject.optional(),
  checkpoint: CheckpointRef.optional(),
  select: z.array(z.string()).optional(),
});

export function threadStateRoutes(ctx: AppContext): FastifyPluginAsync {
  return async (app) => {
    const r = app.withTypeProvider<ZodTypeProvider>();
    const tags = ["thread state"];
    const ref = (checkpoint?: z.infer<typeof CheckpointRef>) => checkpoint && { ...checkpoint, thread_id: undefined };

    r.get("/threads/:thread_id/state", { schema: { tags, params: ThreadIdParams, querystring: z.object({ subgraphs: Bool.optional() }) } }, async (req) =>
      getThreadState(ctx, callerOf(req), req.params.thread_id, { subgraphs: req.query.subgraphs }),
    );

    r.post(
      "/threads/:thread_id/state",
      {
        schema: {
          tags,
          params: ThreadIdParams,
          body: z.strictObject({
            values: z.union([JsonObject, z.array(JsonObject), z.null()]).optional(),
            as_node: z.string().optional(),
            checkpoint: CheckpointRef.optional(),
            checkpoint_id: z.string().optional(),
          }),
        },
      },
      async (req) => updateThreadState(ctx, callerOf(req), req.params.thread_id, { ...req.body, checkpoint: ref(req.body.checkpoint) }),
    );

    r.get(
      "/threads/:thread_id/state/:checkpoint_id",
      { schema: { tags, params: ThreadIdParams.extend({ checkpoint_id: z.string().min(1) }), querystring: z.object({ subgraphs: Bool.optional() }) } },
      async (req) =>
        getThreadState(ctx, callerOf(req), req.params.thread_id, { subgraphs: req.query.subgraphs, checkpoint: { checkpoint_id: req.params.checkpoint_id } }),
    );

    r.post(
      "/threads/:thread_id/state/checkpoint",
      {
        schema: {
          tags,
          params: ThreadIdParams,
          body: z.strictObject({ checkpoint: CheckpointRef, subgraphs: z.boolean().optional(), select: z.array(z.string()).optional() }),
        },
      },
      async (req) => getThreadState(ctx, callerOf(req), req.params.thread_id, { subgraphs: req.body.subgraphs, checkpoint: ref(req.body.checkpoint) }),
    );

    r.get(
      "/threads/:thread_id/history",
      {
        schema: {
          tags,
          params: ThreadIdParams,
          querystring: z.object({ limit: z.coerce.number().int().min(1).max(1000).default(10), before: z.string().optional() }),
        },
      },
      async (req) =>
        getThreadHistory(ctx, callerOf(req), req.params.thread_id, {
          limit: req.query.limit,
          before: req.query.before ? { checkpoint_id: req.query.before } : undefined,
        }),
    );

    r.post("/threads/:thread_id/history", { schema: { tags, params: ThreadIdParams, body: HistoryBody.default({ limit: 10 }) } }, async (req) =>
      getThreadHistory(ctx, callerOf(req), req.params.thread_id, {
        ...req.body,
        before: ref(req.body.before as z.infer<typeof CheckpointRef>),
        checkpoint: ref(req.body.checkpoint),
      }),
    );
  };
}
