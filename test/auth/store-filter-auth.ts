/**
 * Store isolation by filters, as in the official servers' tests: the identity comes from
 * `x-user`; every store handler returns `{namespace: {$contains: identity}}` and leaves the
 * request as it is, so a user reaches only items whose namespace holds their identity. The user
 * `tagged` is filtered on a field of the value instead (`{owner: identity}`).
 */
import { Auth, HTTPException } from "@langchain/langgraph-sdk/auth";

export const auth = new Auth()
  .authenticate(async (request: Request) => {
    const user = request.headers.get("x-user");
    if (!user) throw new HTTPException(401, { message: "Missing x-user" });
    return { identity: user, permissions: [] };
  })
  .on("store", ({ user }): Record<string, string | { $contains: string }> =>
    user.identity === "tagged" ? { owner: user.identity } : { namespace: { $contains: user.identity } },
  );
