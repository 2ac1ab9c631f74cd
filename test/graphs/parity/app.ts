/**
 * The custom app (`http.app`) of the parity tests: a Hono app whose middleware wraps the
 * built-in routes (a response header; a request header copied into a run's configurable) and
 * whose routes answer directly, call the server in-process, shadow a built-in path, throw.
 */
import { Hono } from "hono";
import { HTTPException } from "hono/http-exception";
import { streamText } from "hono/streaming";
import { Client } from "@langchain/langgraph-sdk";

export const app = new Hono()
  .use(async (c, next) => {
    if (c.req.query("interrupt") != null) return c.json({ status: "interrupted" });
    await next();
    c.header("x-js-middleware", "true");
  })
  .use(async (c, next) => {
    const runs = /^(\/runs(\/stream|\/wait)?$|\/threads\/[^/]+\/runs(\/stream|\/wait)?)$/;
    const value = c.req.header("x-configurable-header");
    if (c.req.method === "POST" && runs.test(c.req.path) && value != null) {
      const body = await c.req.json();
      body.config ??= {};
      body.config.configurable ??= {};
      body.config.configurable["x-configurable-header"] ??= value;
    }
    await next();
  })
  .get("/custom/my-route", (c) => c.json({ foo: "bar" }, { headers: { "x-custom-output": c.req.header("x-custom-input") ?? "" } }))
  .get("/custom/client", async (c) => {
    // No apiUrl: the SDK uses the server's loopback fetch (in-process).
    const result = await new Client().runs.wait(null, "agent", { input: { messages: [{ role: "human", content: "in-process" }] } });
    return c.json({ result });
  })
  .get("/runs/afakeroute", (c) => c.json({ foo: "afakeroute" }))
  .get("/custom/error", () => {
    throw new HTTPException(400, { message: "Bad request" });
  })
  .get("/custom/streaming", (c) =>
    streamText(c, async (stream) => {
      for (let i = 0; i < 3; i++) await stream.writeln(`Count: ${i}`);
    }),
  )
  .notFound((c) => c.json({ status: "not-found" }));
