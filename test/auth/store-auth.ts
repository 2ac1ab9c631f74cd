/**
 * Store isolation as the official docs describe it: the identity comes from `x-user`; every
 * store handler rewrites the namespace to start with it, so each user reads and writes only
 * under their own namespace. The user `reader` may not write.
 */
import { Auth, HTTPException } from "@langchain/langgraph-sdk/auth";

export const auth = new Auth()
  .authenticate(async (request: Request) => {
    const user = request.headers.get("x-user");
    if (!user) throw new HTTPException(401, { message: "Missing x-user" });
    return { identity: user, permissions: [] };
  })
  .on("store", ({ action, value, user }) => {
    if (user.identity === "reader" && (action === "put" || action === "delete")) throw new HTTPException(403, { message: "Read only" });
    const v = value as { namespace?: string[] };
    v.namespace = [user.identity, ...(v.namespace ?? [])];
  });
