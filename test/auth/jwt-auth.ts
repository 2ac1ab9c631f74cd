/**
 * A JWT auth file as a LangGraph.js project writes one (`"auth": {"path": "./jwt-auth.ts:auth"}`):
 * bearer tokens verified with jose; `<resource>:read` / `<resource>:write` scopes; every user
 * owns what they create (metadata.owner) and sees only that.
 */
import { Auth, HTTPException } from "@langchain/langgraph-sdk/auth";
import { jwtVerify } from "jose";
import { TEST_JWT_ISSUER, TEST_JWT_SECRET } from "./jwt.js";

const WRITES = new Set(["create", "update", "delete", "create_run", "put", "erase"]);

export const auth = new Auth()
  .authenticate(async (request: Request) => {
    const header = request.headers.get("authorization");
    if (!header?.startsWith("Bearer ")) {
      throw new HTTPException(401, { message: "Missing bearer token", headers: { "WWW-Authenticate": "Bearer" } });
    }
    let payload;
    try {
      ({ payload } = await jwtVerify(header.slice("Bearer ".length), TEST_JWT_SECRET, { issuer: TEST_JWT_ISSUER }));
    } catch {
      throw new HTTPException(401, { message: "Invalid token", headers: { "WWW-Authenticate": 'Bearer error="invalid_token"' } });
    }
    return {
      identity: String(payload.sub),
      permissions: String(payload.scope ?? "")
        .split(" ")
        .filter(Boolean),
      display_name: String(payload.name),
      url_seen: request.url,
    };
  })
  .on("*", ({ resource, action, value, user, permissions }) => {
    const needed = `${resource}:${WRITES.has(action) ? "write" : "read"}`;
    if (!permissions.includes(needed)) throw new HTTPException(403, { message: `Missing scope ${needed}` });
    if (action === "create" || action === "create_run") {
      const v = value as { metadata?: Record<string, unknown> | null };
      v.metadata = { ...(v.metadata ?? {}), owner: user.identity };
    }
    return { owner: user.identity };
  });
