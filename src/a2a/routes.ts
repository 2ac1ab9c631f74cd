/**
 * The A2A edge: `POST /a2a/{assistant_id}` (JSON-RPC 2.0, v0.3 and v1.0) and the agent card at
 * `GET /.well-known/agent-card.json?assistant_id=` (also `/a2a/{assistant_id}/.well-known/agent-card.json`).
 * JSON-RPC errors are answered on HTTP 200 with the request's id; streaming methods answer
 * `text/event-stream` once the envelope is valid, so a later error is an event of that stream.
 * Every operation, and the card under custom auth (its caller from `cardCallerOf`), names an assistant the caller
 * must be able to read (`assistants:read`, as GET /assistants/{id}); one they may not is not found.
 */
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import * as z from "zod";
import type { AppContext } from "../app/context.js";
import type { RunsService } from "../app/runs.js";
import { SseWriter } from "../util/sse-writer.js";
import { notFound } from "../domain/errors.js";
import { defaultAssistantId } from "../runtime/graph-catalogue.js";
import { VERSION } from "../version.js";
import { agentCard, publicBaseUrl } from "./card.js";
import { getAssistant } from "../app/assistants.js";
import { assistantHidden } from "../app/visible-assistants.js";
import { codecFor, v03, v1, type Codec } from "./codec.js";
import { A2AError, ErrorCode, toA2AError, unsupported } from "./errors.js";
import { AuthError } from "../app/auth/engine.js";
import { EnvelopeError, failure, headerVersion, parseRequest, success, type RpcId } from "./jsonrpc.js";
import { A2AService, type SendAccess, type Visible } from "./service.js";
import type { Caller } from "../app/auth/caller.js";
import { RunsAccess } from "../app/runs-access.js";
import type { AuthAction } from "../app/auth/engine.js";
import { readModelTaskIndex } from "./task-index.js";
import { taskOf } from "./task-view.js";
import type { Operation, SendParams } from "./types.js";

export interface A2ARoutesOptions {
  /** PUBLIC_URL: the base URL the card advertises (default: the request's host). */
  publicUrl?: string;
  /** Who asks (custom auth's handlers and user), as the server's authentication established it. */
  callerOf: (request: FastifyRequest) => Caller;
  /**
   * Who asks for an agent card: its path is public (discovery needs no API key), but under custom
   * auth a card shows what `assistants:read` may hide, so the request is authenticated for it.
   */
  cardCallerOf: (request: FastifyRequest) => Promise<Caller>;
}

/**
 * Custom auth on tasks: a task is a run and its context a thread, so each operation runs the
 * `threads` handler the REST route of the same thing runs (read: get, subscribe, push get/list;
 * update: cancel, push set/delete; search: list; create_run: send) and hides what its filters exclude.
 */
function accessOf(runs: RunsAccess, caller: Caller) {
  return {
    visible: (action: AuthAction<"threads">, value: Record<string, unknown>): Promise<Visible | undefined> => runs.visibility(caller, action, value),
    searchable: (value: Record<string, unknown>) => runs.searchConditions(caller, value),
    async send(p: SendParams): Promise<SendAccess> {
      const taskId = p.message.taskId;
      const visible = taskId === undefined ? undefined : await this.visible("read", { run_id: taskId });
      return { ...(visible ? { visible } : {}), caller };
    },
  };
}

type Headers = Record<string, string | string[] | undefined>;

export function a2aRoutes(ctx: AppContext, runs: RunsService, options: A2ARoutesOptions): FastifyPluginAsync {
  const service = new A2AService(ctx, runs, readModelTaskIndex(ctx));
  const runsAccess = new RunsAccess(ctx, runs);

  async function card(request: FastifyRequest, assistantParam: string | undefined) {
    const idOrGraph = assistantParam ?? defaultAssistantId(ctx.graphs.ids()[0] ?? "");
    // Custom auth's refusals (authentication, then `assistants:read`) are answered with their status;
    // an assistant its filters hide is a 404, as an unknown one.
    const caller = await options.cardCallerOf(request);
    const hidden = await assistantHidden(ctx, caller, idOrGraph);
    let assistant;
    try {
      if (!hidden) assistant = await getAssistant(ctx, idOrGraph);
    } catch {
      // not an id, or no such assistant
    }
    if (!assistant) throw notFound(`Assistant '${idOrGraph}' not found`);
    const host = `${ctx.config.host.includes(":") ? `[${ctx.config.host}]` : ctx.config.host}:${ctx.config.port}`;
    return agentCard({
      assistant,
      graph: await service.graphShape(assistant.graph_id),
      baseUrl: publicBaseUrl(options.publicUrl, request.headers as Headers, host),
      version: VERSION,
      apiKey: ctx.config.apiKey !== undefined,
      pushNotifications: !ctx.langgraph.config.http.disable_webhooks,
    });
  }

  /** The non-streaming operations; each returns the encoded `result`. */
  async function call(
    req: FastifyRequest,
    op: Operation,
    codec: Codec,
    assistantParam: string,
    params: unknown,
    headers: Headers,
    signal: AbortSignal,
  ): Promise<unknown> {
    if (op === "extendedCard") throw unsupported("this agent has no authenticated extended card");
    if (op === "pushSet" || op === "pushGet" || op === "pushList" || op === "pushDelete") service.assertPushSupported();
    const caller = options.callerOf(req);
    const assistant = await service.assistant(assistantParam, caller);
    const access = accessOf(runsAccess, caller);
    switch (op) {
      case "send": {
        const p = codec.decodeSend(params);
        const { view, taskId } = await service.start(assistant, p, headers, false, codec.version, await access.send(p));
        // Non-blocking (`blocking: false`, `returnImmediately`): the task as it is now.
        const task = await service.settled(view.run.run_id, taskId, p.historyLength, p.blocking ? signal : AbortSignal.abort());
        return codec.encodeSendResult(task);
      }
      case "get": {
        const p = codec.decodeTaskQuery(params);
        return codec.encodeTask(await service.get(assistant, p.id, p.historyLength, await access.visible("read", { run_id: p.id })));
      }
      case "cancel": {
        const { id } = codec.decodeTaskId(params);
        return codec.encodeTask(await service.cancel(assistant, id, await access.visible("update", { run_id: id, action: "interrupt" })));
      }
      case "list": {
        const p = codec.decodeList(params);
        return codec.encodeList(await service.list(assistant, p, await access.searchable({ thread_id: p.contextId })));
      }
      case "pushSet": {
        const p = codec.decodePushSet(params);
        const set = await service.setPush(assistant, p.taskId, p.config, codec.version, await access.visible("update", { run_id: p.taskId }));
        return codec.encodePushConfig(set.taskId, set.config);
      }
      case "pushGet": {
        const p = codec.decodePushGet(params);
        const got = await service.getPush(assistant, p.taskId, p.configId, await access.visible("read", { run_id: p.taskId }));
        return codec.encodePushConfig(got.taskId, got.config);
      }
      case "pushList": {
        const p = codec.decodePushList(params);
        const listed = await service.listPush(assistant, p.taskId, await access.visible("read", { run_id: p.taskId }));
        return codec.encodePushList(listed.taskId, listed.configs);
      }
      case "pushDelete": {
        const p = codec.decodePushDelete(params);
        await service.deletePush(assistant, p.taskId, p.configId, await access.visible("update", { run_id: p.taskId }));
        return null;
      }
      default:
        throw new A2AError(ErrorCode.Internal, `operation ${op} is not a request/response operation`);
    }
  }

  /** `message/stream` and `tasks/resubscribe` (and their v1.0 names) as one SSE response. */
  async function stream(
    req: FastifyRequest,
    reply: FastifyReply,
    op: Operation,
    codec: Codec,
    id: RpcId,
    assistantParam: string,
    params: unknown,
    headers: Headers,
  ) {
    const sse = new SseWriter(reply, {});
    const stopped = new AbortController();
    const untrack = runs.lifecycle.track(() => sse.end());
    sse.onClose(() => stopped.abort());
    sse.onEnd(() => stopped.abort());
    const send = async (payload: unknown, revision?: bigint) => {
      const backpressure = sse.event("message", payload, revision);
      if (backpressure) await backpressure;
    };
    try {
      const caller = options.callerOf(req);
      const assistant = await service.assistant(assistantParam, caller);
      const access = accessOf(runsAccess, caller);
      if (op === "stream") {
        const p = codec.decodeSend(params);
        const { view, ended, taskId } = await service.start(assistant, p, headers, true, codec.version, await access.send(p));
        await send(success(id, codec.encodeEvent(taskOf(view, ended, { taskId, historyLength: p.historyLength }))));
        for await (const item of service.events(view.run.run_id, taskId, "start", stopped.signal)) {
          await send(success(id, codec.encodeEvent(item.event)), item.revision);
        }
      } else {
        const { id: taskId } = codec.decodeTaskId(params);
        const run = await service.resolve(assistant, taskId, await access.visible("read", { run_id: taskId }));
        const ended = run.view.stream.ended !== undefined;
        const task = taskOf(run.view, run.ended, { taskId: run.taskId });
        if (codec === v1 && ended && task.status.state !== "input-required") {
          throw unsupported(`Task '${taskId}' is ${task.status.state}: a terminal task cannot be subscribed to`);
        }
        await send(success(id, codec.encodeEvent(task)));
        const items = ended ? service.finalEvents(run) : service.events(run.view.run.run_id, run.taskId, "start", stopped.signal);
        for await (const item of items) await send(success(id, codec.encodeEvent(item.event)), item.revision);
      }
    } catch (error) {
      if (!sse.closed) await send(failure(id, codec.encodeError(asA2AError(error, reply))));
    } finally {
      untrack();
      sse.end();
    }
  }

  function asA2AError(error: unknown, reply: FastifyReply): A2AError {
    const e = error instanceof A2AError ? error : toA2AError(error, "task");
    if (!(error instanceof A2AError)) reply.log.error({ err: error }, "a2a request failed");
    return e;
  }

  /** POST /a2a/{assistant_id}: in its own context, with the raw body, so bad JSON is -32700 and not a 422. */
  async function rpcRoutes(app: FastifyInstance) {
    app.removeAllContentTypeParsers();
    app.addContentTypeParser("*", { parseAs: "string" }, (_req, body, done) => done(null, body));
    app.setErrorHandler((error: Error & { statusCode?: number; code?: string }, _request, reply) => {
      // Authentication failures (the API key, custom auth) are answered as on every other route.
      if (error instanceof AuthError || error.statusCode === 401 || error.statusCode === 403) throw error;
      // Failures before the handler (body too large, unreadable body): a JSON-RPC error without an id.
      const tooLarge = error.code === "FST_ERR_CTP_BODY_TOO_LARGE";
      const status = tooLarge ? 413 : 400;
      reply
        .code(status)
        .send(failure(null, { code: ErrorCode.InvalidRequest, message: `Invalid Request: ${tooLarge ? "request body is too large" : error.message}` }));
    });
    const r = app.withTypeProvider<ZodTypeProvider>();
    r.post("/a2a/:assistant_id", { schema: { tags: ["a2a"], params: z.object({ assistant_id: z.string().min(1) }) } }, async (req, reply) => {
      let id: RpcId = null;
      let codec: Codec = v03;
      try {
        const rpc = parseRequest(typeof req.body === "string" ? req.body : undefined);
        id = rpc.id;
        let header;
        try {
          header = headerVersion(req.headers["a2a-version"]);
        } catch (error) {
          codec = v1;
          throw error;
        }
        const found = codecFor(rpc.method, header);
        if (!found) {
          throw new A2AError(ErrorCode.MethodNotFound, `Method not found: ${rpc.method}${header ? ` (A2A-Version ${header})` : ""}`);
        }
        codec = found.codec;
        if (found.operation === "stream" || found.operation === "subscribe") {
          await stream(req, reply, found.operation, codec, id, req.params.assistant_id, rpc.params, req.headers as Headers);
          return;
        }
        const gone = new AbortController();
        reply.raw.on("close", () => {
          if (!reply.raw.writableEnded) gone.abort();
        });
        const result = await call(req, found.operation, codec, req.params.assistant_id, rpc.params, req.headers as Headers, gone.signal);
        return reply.code(200).send(success(id, result));
      } catch (error) {
        const rpcId = error instanceof EnvelopeError ? error.id : id;
        return reply.code(200).send(failure(rpcId, codec.encodeError(asA2AError(error, reply))));
      }
    });
  }

  return async (app) => {
    const r = app.withTypeProvider<ZodTypeProvider>();
    const CardQuery = z.object({ assistant_id: z.string().min(1).optional() });
    r.get("/.well-known/agent-card.json", { schema: { tags: ["a2a"], querystring: CardQuery } }, async (req) => card(req, req.query.assistant_id));
    r.get("/a2a/:assistant_id/.well-known/agent-card.json", { schema: { tags: ["a2a"], params: z.object({ assistant_id: z.string().min(1) }) } }, async (req) =>
      card(req, req.params.assistant_id),
    );
    await app.register(rpcRoutes);
  };
}
