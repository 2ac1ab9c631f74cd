import type { FastifyInstance } from "fastify";
import { assertWithinRequestLimits } from "../util/json-limits.js";

/** Methods whose requests may carry a body (fastify parses bodies only for these). */
const BODY_METHODS = new Set(["POST", "PUT", "PATCH", "DELETE"]);

/**
 * Bodies handled as the official servers do, once for every route:
 * - JSON (and `text/plain`, which the official JS server reads as JSON) with a blank body is no
 *   body: `DELETE` with `content-type: application/json` and nothing after it is not an error;
 * - no body is `{}`, so a route whose fields are all optional takes it (`POST /threads` without
 *   a body or a content type creates a thread), and a route with required fields answers 422
 *   naming the first one missing.
 * A body that is present keeps its strict checks: invalid JSON, `null`, or a wrong field is a 422,
 * and so is JSON beyond the input limits (depth, keys), refused here before any route or schema
 * walks it.
 * Routes in their own context with their own parsers (A2A's raw JSON-RPC body) see raw strings.
 */
export function forgiveEmptyBodies(app: FastifyInstance): void {
  const parseJson = app.getDefaultJsonParser("error", "error");
  app.removeContentTypeParser(["application/json", "text/plain"]);
  app.addContentTypeParser(["application/json", "text/plain"], { parseAs: "string" }, (request, body, done) => {
    if ((body as string).trim() === "") done(null, undefined);
    else
      parseJson(request, body as string, (error, value) => {
        if (error) return done(error, undefined);
        try {
          assertWithinRequestLimits(value, "body");
        } catch (limit) {
          return done(limit as Error, undefined);
        }
        done(null, value);
      });
  });
  // A callback hook: an async one would cost every request two promises.
  app.addHook("preValidation", (request, _reply, done) => {
    if (request.body === undefined && BODY_METHODS.has(request.method)) request.body = {};
    done();
  });
}
