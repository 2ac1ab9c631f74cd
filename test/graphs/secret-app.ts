/**
 * A custom app (`http.app`) with routes that must stay behind authentication: the path
 * normalization tests reach for them through dot segments and other spellings of a public path.
 */
import { Hono } from "hono";

export const app = new Hono()
  .get("/custom/secret", (c) => c.json({ secret: "the custom route's data", path: c.req.path }))
  .post("/custom/echo", async (c) => c.json({ echoed: await c.req.text(), path: c.req.path }))
  // Under a public prefix: public by the server's rules, and must answer only its own path.
  .get("/docs/custom-note", (c) => c.json({ note: "public", path: c.req.path }));

/** The same routes as a plain fetch app (no Hono): it reads the URL it is given. */
export const plain = {
  async fetch(request: Request): Promise<Response> {
    const { pathname } = new URL(request.url);
    if (pathname === "/custom/secret") return Response.json({ secret: "the custom route's data", path: pathname });
    if (pathname === "/custom/echo" && request.method === "POST") return Response.json({ echoed: await request.text(), path: pathname });
    return new Response("no", { status: 404 });
  },
};
