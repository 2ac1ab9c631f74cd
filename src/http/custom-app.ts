/**
 * Custom routes (`http.app` of langgraph.json): a module exporting a Hono app, or any object
 * with a standard `fetch(Request)`, mounted before the built-in routes as the official JS server
 * does (`app.route("/", userApp)` ahead of its own routes, behind CORS and auth).
 *
 * Every request that passed the onRequest hooks (CORS, API key, custom auth) is offered to the
 * app first, with its body buffered (bounded by the body limit):
 *   - a Hono app is composed with a catch-all route registered after its own, so its middleware
 *     wraps the built-in routes too: when the request reaches the catch-all, it falls through to
 *     the built-in routes with the body the middleware left (a JSON body it parsed and changed is
 *     what the built-in route gets) and with the headers the middleware set after `next()`;
 *   - any other fetch app: a 404 answer falls through, anything else is the answer.
 * Requests a custom route answers keep the CORS headers and the rest of the reply pipeline.
 */
import { Readable } from "node:stream";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { loadExport, parseModuleSpec } from "../module-loader.js";
import { requestUrl } from "./request-target.js";

export interface FetchApp {
  fetch(request: Request, env?: unknown, executionCtx?: unknown): Response | Promise<Response>;
}

/** An `http.app` that cannot be loaded or is not an app; stops the start. */
export class CustomAppError extends Error {
  override name = "CustomAppError";
}

function isFetchApp(value: unknown): value is FetchApp {
  return typeof value === "object" && value !== null && typeof (value as FetchApp).fetch === "function";
}

/** Loads `./file.ts:export` (default export when no `:export`) relative to the config's directory. */
export async function loadCustomApp(spec: string, baseDir: string): Promise<FetchApp> {
  const { file, exportName = "default" } = parseModuleSpec(spec);
  const { value: app } = await loadExport({ file, exportName }, baseDir, "http.app", (m) => new CustomAppError(m));
  if (!isFetchApp(app)) throw new CustomAppError(`http.app: export "${exportName}" of ${file} is not an app with fetch(Request) (a Hono app)`);
  return app;
}

// ---------------------------------------------------------------------------------------------
// composing a Hono app with the fall-through

/** Header of the catch-all's answer: the request goes on to the built-in routes. */
const FALLTHROUGH = "x-agent-server-fallthrough";

interface HonoLike extends FetchApp {
  routes: unknown[];
  use(path: string, handler: (c: HonoContext, next: () => Promise<void>) => Promise<void>): unknown;
  route(path: string, app: unknown): unknown;
  all(path: string, handler: (c: HonoContext) => Response | Promise<Response>): unknown;
}
interface HonoContext {
  req: { raw: Request; bodyCache: Record<string, Promise<unknown> | undefined> };
}

function isHono(app: FetchApp): app is HonoLike {
  const a = app as Partial<HonoLike>;
  return Array.isArray(a.routes) && typeof a.route === "function" && typeof a.all === "function";
}

/** What a request that fell through carries on to the built-in routes. */
interface FallThrough {
  /** The JSON body as the middleware left it (when it parsed it). */
  json?: unknown;
}

/**
 * The app the requests are offered to. A Hono app is mounted in a new instance of its own class
 * (no Hono of ours needed, whatever version the project uses), followed by the catch-all.
 */
function composed(app: FetchApp, fellThrough: WeakMap<Request, FallThrough>): FetchApp {
  if (!isHono(app)) return app;
  const Outer = app.constructor as new () => HonoLike;
  const outer = new Outer();
  // Hono (4.x) caches the body as text and parses it again on every c.req.json(), so a change a
  // middleware makes to the parsed object would be lost: one parse per request, shared by all.
  const parsed = new WeakMap<Request, Promise<unknown>>();
  outer.use("*", async (c, next) => {
    const req = c.req as unknown as { json(): Promise<unknown> };
    const parse = req.json.bind(req);
    req.json = () => {
      let json = parsed.get(c.req.raw);
      if (!json) parsed.set(c.req.raw, (json = parse()));
      return json;
    };
    await next();
  });
  outer.route("/", app);
  outer.all("*", async (c) => {
    const carried: FallThrough = {};
    // The parsed JSON as the middleware left it (the object it changed, if it changed one).
    const json = parsed.get(c.req.raw) ?? c.req.bodyCache.json;
    if (json !== undefined) carried.json = await json;
    fellThrough.set(c.req.raw, carried);
    return new Response(null, { status: 404, headers: { [FALLTHROUGH]: "1" } });
  });
  return outer;
}

// ---------------------------------------------------------------------------------------------
// the fastify side

async function readBody(stream: NodeJS.ReadableStream, limit: number): Promise<Buffer | "too large"> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream as AsyncIterable<Buffer | string>) {
    const buf = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
    size += buf.length;
    if (size > limit) return "too large";
    chunks.push(buf);
  }
  return Buffer.concat(chunks);
}

function webRequest(request: FastifyRequest, body: Buffer | undefined): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(request.headers)) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) headers.append(name, v);
  }
  // The checked target (request-target.ts): the path the public check and the auth hooks saw.
  return new Request(requestUrl(request), {
    method: request.method,
    headers,
    body: body && body.length > 0 ? body : undefined,
  });
}

/** Headers the middleware set on the catch-all's answer, to add to the built-in route's reply. */
function middlewareHeaders(response: Response): [string, string][] {
  const out: [string, string][] = [];
  response.headers.forEach((value, name) => {
    if (name !== FALLTHROUGH && name !== "content-length" && name !== "content-type") out.push([name, value]);
  });
  return out;
}

/**
 * Offers every request to `app` before the built-in routes (a preParsing hook: after the
 * onRequest hooks, before fastify reads the body).
 */
export function mountCustomApp(fastify: FastifyInstance, app: FetchApp, options: { bodyLimit: number }): void {
  const fellThrough = new WeakMap<Request, FallThrough>();
  const target = composed(app, fellThrough);
  const addHeaders = new WeakMap<FastifyRequest, [string, string][]>();

  fastify.addHook("preParsing", async (request: FastifyRequest, reply: FastifyReply, payload) => {
    const hasBody = request.method !== "GET" && request.method !== "HEAD";
    let body: Buffer | undefined;
    if (hasBody) {
      // A declared length over the limit is refused before reading: its body may never come
      // whole, and waiting for it would hold the request until the receive timeout. The rest of
      // an unread body cannot be skipped cheaply, so the connection closes after the answer.
      const declared = Number(request.headers["content-length"] ?? 0);
      const read = declared > options.bodyLimit ? "too large" : await readBody(payload, options.bodyLimit);
      if (read === "too large") {
        await reply
          .code(413)
          .header("connection", "close")
          .send({ detail: `Request body is larger than ${options.bodyLimit} bytes` });
        return payload;
      }
      body = read;
    }
    const req = webRequest(request, body);
    let response: Response;
    try {
      response = await target.fetch(req, { incoming: request.raw, outgoing: reply.raw });
    } catch (error) {
      request.log.error({ err: error }, "custom app failed");
      await reply.code(500).send({ detail: "Internal Server Error" });
      return payload;
    }
    const carried = fellThrough.get(req);
    const fallsThrough = carried !== undefined || (!isHono(app) && response.status === 404);
    if (!fallsThrough) {
      await reply.send(response);
      return payload;
    }
    if (carried) addHeaders.set(request, middlewareHeaders(response));
    if (!hasBody) return payload;
    // The built-in route reads the body the custom middleware left.
    const next = carried?.json !== undefined ? Buffer.from(JSON.stringify(carried.json)) : body!;
    request.headers["content-length"] = String(next.length);
    const stream = Readable.from([next]) as Readable & { receivedEncodedLength?: number };
    stream.receivedEncodedLength = next.length;
    return stream;
  });

  fastify.addHook("onSend", async (request, reply, payload) => {
    const headers = addHeaders.get(request);
    if (headers) for (const [name, value] of headers) reply.header(name, value);
    return payload;
  });
}

// ---------------------------------------------------------------------------------------------
// in-process calls to this server's API

const LOOPBACK_FETCH = Symbol.for("langgraph_api:fetch");

/**
 * Binds the loopback fetch the SDK's `Client` uses when no `apiUrl` is given (as the official
 * server does): requests go to this fastify app in-process (`inject`), under the mount prefix.
 * Returns the function that unbinds it.
 */
export function bindLoopbackFetch(fastify: FastifyInstance, mountPrefix = ""): () => void {
  const loopback = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const req = new Request(input, init);
    const url = new URL(req.url);
    const body = req.body ? Buffer.from(await req.arrayBuffer()) : undefined;
    const headers: Record<string, string> = {};
    req.headers.forEach((value, name) => (headers[name] = value));
    const res = await fastify.inject({
      method: req.method as "GET",
      url: `${mountPrefix}${url.pathname}${url.search}`,
      headers,
      ...(body ? { payload: body } : {}),
    });
    const out = new Headers();
    for (const [name, value] of Object.entries(res.headers)) {
      if (value === undefined) continue;
      for (const v of Array.isArray(value) ? value : [value]) out.append(name, String(v));
    }
    const empty = res.statusCode === 204 || res.statusCode === 304 || req.method === "HEAD";
    return new Response(empty ? null : res.rawPayload, { status: res.statusCode, headers: out });
  };
  const g = globalThis as Record<symbol, unknown>;
  g[LOOPBACK_FETCH] = loopback;
  return () => {
    if (g[LOOPBACK_FETCH] === loopback) delete g[LOOPBACK_FETCH];
  };
}
