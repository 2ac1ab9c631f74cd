import type { OutgoingHttpHeaders } from "node:http";
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import * as z from "zod";
import type { AppContext } from "../../app/context.js";
import type { RunsService } from "../../app/runs.js";
import { RunRequestSchema, StatelessRunRequestSchema, StreamModeSchema, type RunRequest } from "../../domain/run-request.js";
import { RunStatusSchema, type RunRecord } from "../../domain/run-record.js";
import { CancelActionSchema } from "../../domain/runs.js";
import { Uuid } from "../schemas.js";
import { pick } from "../../domain/json.js";
import { logPositionHeaders } from "../../context/request-context.js";
import { SseWriter, parseLastEventId, runSseId, streamModeFilter } from "../sse.js";
import { callerOf } from "../auth.js";
import { RunsAccess } from "../../app/runs-access.js";
import { idempotencyKeyOf } from "../../app/idempotent-create.js";
import { batchItemKey } from "../../domain/idempotency.js";
import { tracePoint } from "../../util/trace-points.js";
import { DomainError } from "../../domain/errors.js";

const ThreadParams = z.object({ thread_id: Uuid });
const RunParams = z.object({ thread_id: Uuid, run_id: Uuid });
const StatelessRunParams = z.object({ run_id: Uuid });
const Truthy = z
  .string()
  .optional()
  .transform((v) => v !== undefined && ["true", "yes", "1"].includes(v.toLowerCase()));
const RunFields = ["run_id", "thread_id", "assistant_id", "created_at", "updated_at", "status", "metadata", "kwargs", "multitask_strategy"] as const;
const ListQuery = z.object({
  limit: z.coerce.number().int().min(1).max(1000).default(10),
  offset: z.coerce.number().int().min(0).default(0),
  status: RunStatusSchema.optional(),
  select: z.union([z.enum(RunFields), z.array(z.enum(RunFields))]).optional(),
});
const CancelQuery = z.object({ wait: Truthy, action: CancelActionSchema.default("interrupt") });
const JoinQuery = z.object({ cancel_on_disconnect: Truthy });
const JoinStreamQuery = z.object({
  cancel_on_disconnect: Truthy,
  stream_mode: z
    .union([StreamModeSchema, z.array(StreamModeSchema)])
    .optional()
    .transform((v) => (v === undefined ? undefined : Array.isArray(v) ? v : [v])),
});
const CancelManyBody = z
  .object({ thread_id: Uuid.optional(), run_ids: z.array(Uuid).optional(), status: z.enum(["pending", "running", "all"]).optional() })
  .refine((b) => (b.run_ids !== undefined) !== (b.status !== undefined), { message: "give either thread_id and run_ids, or status" });

/**
 * The one `error` event the official server streams (with a 200) when a run's stream cannot be joined,
 * from what `RunsAccess.get` refused, as langgraphjs's `Runs.Stream.join` (libs/langgraph-api/src/storage/ops.mts)
 * yields it: a thread the caller may not see, `{"error": "Error", "message": "404: Thread not found"}`
 * (whatever the run id, so no run's existence shows); no such run on the thread (nor such a thread),
 * the bare string `"Run not found"`. Undefined for any other error, which keeps its HTTP answer.
 */
function joinRefusalEvent(error: unknown): unknown {
  if (!(error instanceof DomainError) || error.kind !== "not_found") return undefined;
  if (error.detail === "Run not found") return "Run not found";
  if (error.detail.startsWith("Thread with ID ")) return { error: "Error", message: "404: Thread not found" };
  return undefined;
}

/** Where a run lives, as the Python server reports it in Content-Location / Location. */
const runPath = (run: RunRecord, stateless: boolean) => (stateless ? `/runs/${run.run_id}` : `/threads/${run.thread_id}/runs/${run.run_id}`);

export function runRoutes(ctx: AppContext, runs: RunsService, streams: { openStreams: number } = { openStreams: 0 }): FastifyPluginAsync {
  const lifecycle = runs.lifecycle;
  /**
   * Streams a run's outputs as SSE (the run's lifecycle reads them from the log); cancels it when the
   * client leaves if asked to. `from`: "created" for the run this request created, whose stream the
   * lifecycle opens without waiting for the run's own (createdOutputs); else where a join resumes.
   */
  async function streamRun(
    reply: FastifyReply,
    run: RunRecord,
    headers: Record<string, string>,
    from: bigint | "start" | "created",
    cancelOnDisconnect: boolean,
    modes?: string[],
  ) {
    const sse = new SseWriter(reply, { ...headers, ...logPositionHeaders() });
    streams.openStreams++; // the metrics' gauge: down once, whoever ends the stream
    let counted = true;
    const uncount = () => {
      if (counted) streams.openStreams--;
      counted = false;
    };
    sse.onClose(uncount);
    sse.onEnd(uncount);
    const untrack = lifecycle.track(() => sse.end());
    if (cancelOnDisconnect) {
      sse.onClose(() => {
        if (!lifecycle.isDone(run.run_id)) void runs.cancel(null, run.run_id, "interrupt").catch(() => undefined);
      });
    }
    const closed = new AbortController();
    sse.onClose(() => closed.abort());
    sse.onEnd(() => closed.abort());
    const accept = streamModeFilter(modes);
    const outputs =
      from === "created" ? lifecycle.createdOutputs(run.run_id, accept, closed.signal) : lifecycle.outputs(run.run_id, from, accept, closed.signal);
    for await (const output of outputs) {
      const backpressure = sse.eventJson(output.event, output.json, runSseId(output.revision));
      if (backpressure) await backpressure;
    }
    untrack();
    sse.end();
  }

  /**
   * Answers a run's result as JSON once it is over, headers first (then a newline every 5 s, as the
   * Python server, so that no client or proxy times out) when the lifecycle says they are due.
   * `createdHere`: the run was created for this wait (runs.create's `forResult`).
   */
  async function waitRun(reply: FastifyReply, run: RunRecord, headers: Record<string, string>, cancelOnDisconnect: boolean, createdHere = false) {
    const created = createdHere ? run : undefined;
    reply.hijack();
    const raw = reply.raw;
    // Headers hooks already set (CORS) would be lost on a hijacked reply otherwise.
    raw.writeHead(200, { ...(reply.getHeaders() as OutgoingHttpHeaders), "Content-Type": "application/json", ...headers, ...logPositionHeaders() });
    const controller = new AbortController();
    raw.on("close", () => {
      if (raw.writableEnded) return;
      controller.abort();
      if (cancelOnDisconnect && !lifecycle.isDone(run.run_id, created)) void runs.cancel(null, run.run_id, "interrupt").catch(() => undefined);
    });
    const answer = lifecycle.answer(run.run_id, controller.signal, created);
    let answered = false;
    let keepAlive: NodeJS.Timeout | undefined;
    void answer.headersDue?.then(() => {
      if (answered || raw.destroyed) return;
      raw.flushHeaders();
      keepAlive = setInterval(() => raw.write("\n"), 5_000);
    });
    const result = await answer.result;
    tracePoint("wait.result");
    answered = true;
    clearInterval(keepAlive);
    if (!controller.signal.aborted) raw.end(JSON.stringify(result));
    tracePoint("wait.answered");
  }

  const headersOf = (req: FastifyRequest) => req.headers as Record<string, string | string[] | undefined>;

  /** `threads:create_run`, then the run with the metadata the handler left. */
  async function createRun(req: FastifyRequest, threadId: string | null, body: RunRequest, forResult = false): Promise<RunRecord> {
    return runs.create(await runs.authorize(callerOf(req), threadId, body), headersOf(req), { forResult });
  }

  const access = new RunsAccess(ctx, runs);

  return async (app) => {
    const r = app.withTypeProvider<ZodTypeProvider>();
    const tags = ["runs"];

    for (const prefix of ["/threads", "/thread"]) {
      // The singular prefix is an alias (the webhook docs use it): served, not listed twice in the OpenAPI document.
      const hide = prefix === "/thread";
      r.post(`${prefix}/:thread_id/runs`, { schema: { tags, hide, params: ThreadParams, body: RunRequestSchema } }, async (req, reply) => {
        const run = await createRun(req, req.params.thread_id, req.body);
        reply.header("Content-Location", runPath(run, false));
        return run;
      });

      r.post(`${prefix}/:thread_id/runs/stream`, { schema: { tags, hide, params: ThreadParams, body: RunRequestSchema } }, async (req, reply) => {
        const run = await createRun(req, req.params.thread_id, req.body);
        const path = runPath(run, false);
        await streamRun(reply, run, { "Content-Location": path, Location: `${path}/stream` }, "created", run.kwargs.on_disconnect === "cancel");
      });

      r.post(`${prefix}/:thread_id/runs/wait`, { schema: { tags, hide, params: ThreadParams, body: RunRequestSchema } }, async (req, reply) => {
        tracePoint("wait.route");
        const run = await createRun(req, req.params.thread_id, req.body, true);
        tracePoint("wait.created");
        const path = runPath(run, false);
        await waitRun(reply, run, { "Content-Location": path, Location: `${path}/join` }, run.kwargs.on_disconnect === "cancel", true);
      });

      r.get(`${prefix}/:thread_id/runs`, { schema: { tags, hide, params: ThreadParams, querystring: ListQuery } }, async (req) => {
        const select = req.query.select === undefined ? undefined : Array.isArray(req.query.select) ? req.query.select : [req.query.select];
        return (await access.list(callerOf(req), req.params.thread_id, req.query)).map((r) => pick(r, select));
      });

      r.get(`${prefix}/:thread_id/runs/:run_id`, { schema: { tags, hide, params: RunParams } }, async (req) => {
        return access.get(callerOf(req), req.params.thread_id, req.params.run_id);
      });

      r.delete(`${prefix}/:thread_id/runs/:run_id`, { schema: { tags, hide, params: RunParams } }, async (req, reply) => {
        await access.delete(callerOf(req), req.params.thread_id, req.params.run_id);
        return reply.code(204).send();
      });

      r.post(`${prefix}/:thread_id/runs/:run_id/cancel`, { schema: { tags, hide, params: RunParams, querystring: CancelQuery } }, async (req, reply) => {
        const run = await access.cancel(callerOf(req), req.params.thread_id, req.params.run_id, req.query.action);
        if (!req.query.wait) {
          return reply.code(202).send();
        }
        await waitRun(reply, run, {}, false);
      });

      r.get(`${prefix}/:thread_id/runs/:run_id/join`, { schema: { tags, hide, params: RunParams, querystring: JoinQuery } }, async (req, reply) => {
        const run = await access.get(callerOf(req), req.params.thread_id, req.params.run_id);
        const path = runPath(run, false);
        await waitRun(reply, run, { "Content-Location": path, Location: `${path}/join` }, req.query.cancel_on_disconnect);
      });

      r.get(`${prefix}/:thread_id/runs/:run_id/stream`, { schema: { tags, hide, params: RunParams, querystring: JoinStreamQuery } }, async (req, reply) => {
        // A run of a thread the caller may not see, or no such run: a 200 stream of one `error` event, as the official server answers.
        let run: RunRecord;
        try {
          run = await access.get(callerOf(req), req.params.thread_id, req.params.run_id);
        } catch (error) {
          const event = joinRefusalEvent(error);
          if (event === undefined) throw error;
          const sse = new SseWriter(reply, logPositionHeaders());
          const backpressure = sse.event("error", event);
          if (backpressure) await backpressure;
          sse.end();
          return;
        }
        const from = parseLastEventId(req.headers["last-event-id"]);
        const path = runPath(run, false);
        await streamRun(reply, run, { "Content-Location": path, Location: `${path}/stream` }, from, req.query.cancel_on_disconnect, req.query.stream_mode);
      });
    }

    r.post("/runs", { schema: { tags, body: StatelessRunRequestSchema } }, async (req, reply) => {
      const run = await createRun(req, null, req.body);
      reply.header("Content-Location", runPath(run, true));
      return run;
    });

    r.post("/runs/stream", { schema: { tags, body: StatelessRunRequestSchema } }, async (req, reply) => {
      const run = await createRun(req, null, req.body);
      const path = runPath(run, true);
      await streamRun(reply, run, { "Content-Location": path, Location: `${path}/stream` }, "created", run.kwargs.on_disconnect === "cancel");
    });

    r.post("/runs/wait", { schema: { tags, body: StatelessRunRequestSchema } }, async (req, reply) => {
      const run = await createRun(req, null, req.body, true);
      const path = runPath(run, true);
      await waitRun(reply, run, { "Content-Location": path }, run.kwargs.on_disconnect === "cancel", true);
    });

    r.post("/runs/batch", { schema: { tags, body: z.array(StatelessRunRequestSchema).min(1) } }, async (req) => {
      const created: RunRecord[] = [];
      // One Idempotency-Key for the batch: each item is its own key, derived from it.
      const key = idempotencyKeyOf(headersOf(req));
      for (const [i, body] of req.body.entries()) {
        created.push(await runs.create(await runs.authorize(callerOf(req), null, body), headersOf(req), { idempotencyKey: key && batchItemKey(key, i) }));
      }
      return created;
    });

    r.get("/runs/:run_id/stream", { schema: { tags, params: StatelessRunParams, querystring: JoinStreamQuery } }, async (req, reply) => {
      const run = await access.getStateless(callerOf(req), req.params.run_id);
      const from = parseLastEventId(req.headers["last-event-id"]);
      const path = runPath(run, true);
      await streamRun(reply, run, { "Content-Location": path, Location: `${path}/stream` }, from, req.query.cancel_on_disconnect, req.query.stream_mode);
    });

    r.post(
      "/runs/cancel",
      { schema: { tags, body: CancelManyBody, querystring: z.object({ action: CancelActionSchema.default("interrupt") }) } },
      async (req, reply) => {
        const n = await access.cancelMany(callerOf(req), req.body, req.query.action);
        if (n === 0) {
          return reply.code(404).send({ detail: "No matching runs to cancel" });
        }
        return reply.code(204).send();
      },
    );
  };
}
