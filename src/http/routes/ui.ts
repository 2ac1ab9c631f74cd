import path from "node:path";
import type { FastifyPluginAsync } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import * as z from "zod";
import { uiGlobalName, type UiBundles } from "../../runtime/ui-bundles.js";
import { HttpError } from "../errors.js";

/**
 * Generative UI, as the official JS server serves it (`libs/langgraph-api/src/ui/load.mts`):
 *   POST /ui/{agent} {"name"}  the HTML the SDK's `LoadExternalComponent` injects: a stylesheet
 *                              link per CSS asset and the script whose onload renders `name`
 *                              into the shadow root `{{shadowRootId}}` (the SDK fills it in);
 *   GET /ui/{agent}/{file}     the bundled assets (public: a `<script src>` sends no credentials).
 * Asset URLs name the request's host: `http://` for localhost / 127.0.0.1, protocol-relative
 * otherwise, as the official server writes them.
 */

const Params = z.object({ agent: z.string() });
const AssetParams = z.object({ agent: z.string(), basename: z.string() });
const Body = z.object({ name: z.string() });

const CONTENT_TYPES: Record<string, string> = {
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".map": "application/json; charset=utf-8",
  ".json": "application/json; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".jpg": "image/jpeg",
  ".jpeg": "image/jpeg",
  ".gif": "image/gif",
  ".webp": "image/webp",
  ".woff": "font/woff",
  ".woff2": "font/woff2",
};

/** A Host header fit to write into a URL (anything else: a path-only URL). */
const PLAIN_HOST = /^[A-Za-z0-9.-]+(:\d+)?$|^\[[0-9A-Fa-f:.]+\](:\d+)?$/;

function assetBase(host: string | undefined, mountPrefix: string, agent: string): string {
  const at = `${mountPrefix}/ui/${encodeURIComponent(agent)}`;
  if (!host || !PLAIN_HOST.test(host)) return at;
  const name = host.replace(/:\d+$/, "");
  const protocol = name === "localhost" || name === "127.0.0.1" ? "http:" : "";
  return `${protocol}//${host}${at}`;
}

/** A JSON string safe inside a single-quoted HTML attribute. */
const attributeJson = (value: string) => JSON.stringify(value).replace(/'/g, "\\u0027").replace(/</g, "\\u003c").replace(/&/g, "\\u0026");
const attributeUrl = (value: string) => value.replace(/&/g, "&amp;").replace(/"/g, "&quot;");

export function uiRoutes(bundles: UiBundles, options: { mountPrefix?: string } = {}): FastifyPluginAsync {
  const mountPrefix = options.mountPrefix ?? "";
  const assetsOf = (agent: string) => {
    const assets = bundles.get(agent);
    if (!assets?.length) throw new HttpError(404, `UI not found for agent "${agent}"`);
    return assets;
  };
  return async (app) => {
    const r = app.withTypeProvider<ZodTypeProvider>();
    r.post("/ui/:agent", { schema: { params: Params, body: Body } }, async (request, reply) => {
      const { agent } = request.params;
      const assets = assetsOf(agent);
      const base = assetBase(request.headers.host, mountPrefix, agent);
      const html: string[] = [];
      for (const css of assets.filter((a) => path.extname(a.basename) === ".css")) {
        html.push(`<link rel="stylesheet" href="${attributeUrl(`${base}/${css.basename}`)}" />`);
      }
      const js = assets.find((a) => path.extname(a.basename) === ".js");
      if (js) {
        const render = `${uiGlobalName(agent)}.render(${attributeJson(request.body.name)}, "{{shadowRootId}}")`;
        html.push(`<script src="${attributeUrl(`${base}/${js.basename}`)}" onload='${render}'></script>`);
      }
      return reply.type("text/html; charset=utf-8").send(html.join("\n"));
    });
    r.get("/ui/:agent/:basename", { schema: { params: AssetParams } }, async (request, reply) => {
      const { agent, basename } = request.params;
      const asset = assetsOf(agent).find((a) => a.basename === basename);
      if (!asset) throw new HttpError(404, `File not found: ${basename}`);
      const type = CONTENT_TYPES[path.extname(basename).toLowerCase()] ?? "application/octet-stream";
      return reply.type(type).send(Buffer.from(asset.contents));
    });
  };
}
