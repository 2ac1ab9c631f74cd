import { createHash, timingSafeEqual } from "node:crypto";
import type { FastifyInstance } from "fastify";
import { isPublicRequest } from "./public-paths.js";

const digest = (value: string) => createHash("sha256").update(value).digest();

/** When an API key is configured, every other route needs it in `x-api-key` (compared in constant time). */
export function requireApiKey(app: FastifyInstance, apiKey: string): void {
  const expected = digest(apiKey);
  app.addHook("onRequest", async (request, reply) => {
    if (isPublicRequest(request)) return;
    const given = request.headers["x-api-key"];
    const ok = typeof given === "string" && timingSafeEqual(digest(given), expected);
    if (!ok) return reply.code(401).send({ detail: "Missing or invalid API key (x-api-key header)" });
  });
}
