import type { FastifyPluginAsync } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import * as z from "zod";
import type { AppContext } from "../../app/context.js";
import type { ThreadLifecycle } from "../../app/thread-lifecycle.js";
import { ThreadsAccess } from "../../app/threads-access.js";
import { parseThreadStreamLastEventId, ThreadStreamModesSchema } from "../../domain/thread-stream.js";
import { logPositionHeaders } from "../../context/request-context.js";
import { callerOf } from "../auth.js";
import { HttpError } from "../errors.js";
import { ThreadIdParams } from "../schemas.js";
import { SseWriter } from "../sse.js";

const Listed = z.union([z.string(), z.array(z.string())]).optional();
const StreamQuery = z.object({ stream_mode: Listed, stream_modes: Listed });
const listed = (v: z.infer<typeof Listed>) => (v === undefined ? [] : Array.isArray(v) ? v : [v]);

export interface OpenStreams {
  /** The metrics' gauge of open SSE streams. */
  openStreams: number;
}

/**
 * `GET /threads/{thread_id}/stream`: every run of the thread (and, per `stream_mode`, its
 * lifecycle and state updates) as one SSE stream that stays open until the client leaves, the
 * thread is deleted or the server stops; resumable with `Last-Event-ID`.
 */
export function threadStreamRoutes(
  ctx: AppContext,
  lifecycle: ThreadLifecycle,
  /** Registers a stream to end at shutdown (RunsService.track). */
  track: (end: () => void) => () => void,
  gauge: OpenStreams = { openStreams: 0 },
): FastifyPluginAsync {
  return async (app) => {
    const r = app.withTypeProvider<ZodTypeProvider>();
    const threads = new ThreadsAccess(ctx, lifecycle);

    r.get("/threads/:thread_id/stream", { schema: { tags: ["threads"], params: ThreadIdParams, querystring: StreamQuery } }, async (req, reply) => {
      // Both SDKs send `stream_mode`; the Python server documents `stream_modes`.
      const modes = ThreadStreamModesSchema.safeParse([...listed(req.query.stream_mode), ...listed(req.query.stream_modes)]);
      if (!modes.success) throw new HttpError(422, `querystring.stream_mode: ${modes.error.issues[0]?.message ?? "invalid"}`);
      const start = parseThreadStreamLastEventId(req.headers["last-event-id"]);
      if (start && "error" in start) throw new HttpError(422, start.error);
      const closed = new AbortController();
      // Authorization and the thread's existence are checked before the response starts.
      const events = await threads.stream(callerOf(req), req.params.thread_id, modes.data, start, closed.signal);
      const sse = new SseWriter(reply, { Location: `/threads/${req.params.thread_id}/stream`, ...logPositionHeaders() });
      gauge.openStreams++;
      const untrack = track(() => sse.end());
      sse.onClose(() => closed.abort());
      sse.onEnd(() => closed.abort());
      try {
        for await (const e of events) {
          if (sse.closed) break;
          const backpressure = sse.event(e.event, e.data, e.id);
          if (backpressure) await backpressure;
        }
      } finally {
        gauge.openStreams--;
        untrack();
        sse.end();
      }
    });
  };
}
