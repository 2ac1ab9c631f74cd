/**
 * The thread streaming protocol (v2) edge, as `@langchain/langgraph-sdk`'s `ThreadStream` and
 * `@langchain/react`'s `useStream` speak it:
 *   POST /threads/{thread_id}/commands       one command → its response (JSON)
 *   POST /threads/{thread_id}/stream/events  SSE of the thread's events; body {channels, namespaces, depth, since}
 *   GET  /threads/{thread_id}/stream/events  the same over a WebSocket, commands and subscriptions in-band
 * Events are read from the log (see thread-feed.ts); nothing here talks to a worker.
 */
import type { FastifyPluginAsync, FastifyRequest } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import websocket from "@fastify/websocket";
import * as z from "zod";
import type { AppContext } from "../app/context.js";
import type { RunsService } from "../app/runs.js";
import type { Caller } from "../app/auth/caller.js";
import { AuthError } from "../app/auth/engine.js";
import { DomainError } from "../domain/errors.js";
import { SseWriter } from "../util/sse-writer.js";
import { ProtocolCommands, type ProtocolCommand } from "./commands.js";
import { subscribe } from "./subscriber.js";
import { WsSession } from "./ws-session.js";
import { UuidSchema } from "../domain/ids.js";

export interface ProtocolRoutesOptions {
  /** Who asks (custom auth's handlers and user), as the server's authentication established it. */
  callerOf: (request: FastifyRequest) => Caller;
}

const ThreadParams = z.object({ thread_id: UuidSchema });
const Channel = z
  .string()
  .refine((c) => ["values", "updates", "messages", "tools", "lifecycle", "input", "checkpoints", "tasks", "custom"].includes(c) || c.startsWith("custom:"), {
    message: "unknown channel",
  });
const EventsBody = z
  .object({
    channels: z.array(Channel).min(1),
    namespaces: z.array(z.array(z.string())).optional(),
    depth: z.number().int().nonnegative().optional(),
    since: z.number().int().nonnegative().optional(),
  })
  .strict();
const CommandBody = z.object({ id: z.number().int().nonnegative(), method: z.string().min(1), params: z.record(z.string(), z.unknown()).optional() });

/** A failure before a WebSocket is accepted → its close code (4000 + the HTTP status SSE would answer). */
function closeCodeOf(error: unknown): number {
  if (error instanceof AuthError) return 4000 + error.status;
  if (error instanceof DomainError) return error.kind === "not_found" ? 4404 : 4422;
  return 1011;
}

export function protocolRoutes(ctx: AppContext, runs: RunsService, options: ProtocolRoutesOptions): FastifyPluginAsync {
  const commands = new ProtocolCommands(ctx, runs);
  const headersOf = (req: FastifyRequest) => req.headers as Record<string, string | string[] | undefined>;

  return async (app) => {
    await app.register(websocket, { options: { maxPayload: 4 * 1024 * 1024 } });
    const r = app.withTypeProvider<ZodTypeProvider>();
    const tags = ["thread streaming protocol"];

    r.post("/threads/:thread_id/commands", { schema: { tags, params: ThreadParams, body: CommandBody } }, async (req) => {
      const threadId = req.params.thread_id;
      return commands.handle(options.callerOf(req), threadId, req.body as ProtocolCommand, headersOf(req));
    });

    r.post("/threads/:thread_id/stream/events", { schema: { tags, params: ThreadParams, body: EventsBody } }, async (req, reply) => {
      const threadId = req.params.thread_id;
      const caller = options.callerOf(req);
      // Refused before the stream starts: a 403/404 the client sees as such (and does not retry).
      await commands.authorizeRead(caller, threadId);
      const sse = new SseWriter(reply, {});
      const untrack = runs.lifecycle.track(() => sse.end());
      const subscriber = subscribe(
        ctx.store,
        threadId,
        req.body,
        () => commands.authorizeRead(caller, threadId),
        (event) => sse.event(event.method, event, event.event_id),
      );
      sse.onClose(() => subscriber.stop());
      sse.onEnd(() => subscriber.stop());
      await subscriber.done.catch((error) => req.log.warn({ err: error }, "protocol event stream ended"));
      untrack();
      sse.end();
    });

    r.get("/threads/:thread_id/stream/events", { schema: { tags, params: ThreadParams }, websocket: true }, async (socket, req) => {
      const threadId = (req.params as { thread_id: string }).thread_id;
      const caller = options.callerOf(req);
      try {
        await commands.authorizeRead(caller, threadId);
      } catch (error) {
        socket.close(closeCodeOf(error), error instanceof Error ? error.message.slice(0, 100) : undefined);
        return;
      }
      const send = (message: unknown) =>
        new Promise<void>((resolve) => {
          if (socket.readyState !== socket.OPEN) return resolve();
          socket.send(JSON.stringify(message), () => resolve());
        });
      const session = new WsSession({
        store: ctx.store,
        threadId,
        send,
        command: (command) => commands.handle(caller, threadId, command, headersOf(req)),
        authorize: () => commands.authorizeRead(caller, threadId),
      });
      // Commands run one after the other, in the order they came.
      let queue = Promise.resolve();
      socket.on("message", (data: Buffer | ArrayBuffer | Buffer[]) => {
        ctx.readModels.runner.settle(); // read-your-writes, as for an HTTP request (see CatchUpRunner.settle)
        const text = Array.isArray(data)
          ? Buffer.concat(data).toString("utf8")
          : Buffer.isBuffer(data)
            ? data.toString("utf8")
            : Buffer.from(data).toString("utf8");
        queue = queue.then(() => session.onMessage(text)).catch((error) => req.log.warn({ err: error }, "protocol command failed"));
      });
      const untrack = runs.lifecycle.track(() => socket.close(1001, "server shutting down"));
      socket.on("close", () => {
        untrack();
        session.close();
      });
    });
  };
}
