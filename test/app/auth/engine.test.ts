import t from "tap";
import { Auth, HTTPException } from "@langchain/langgraph-sdk/auth";
import { AUTH_ACTIONS, authenticate, authorize, findHandler, normalizeUser, type AuthResource } from "../../../src/app/auth/engine.js";
import { authHandlersOf, type AuthHandlers } from "../../../src/app/auth/handlers.js";
import { AuthError } from "../../../src/app/auth/engine.js";

/** The engine with real `Auth` instances of the official SDK, for every resource and action. */

const handlersOf = (auth: Auth): AuthHandlers => {
  const h = authHandlersOf(auth)!;
  return { authenticate: h.authenticate ?? (() => "anon"), callbacks: h.callbacks };
};
const alice = normalizeUser({ identity: "alice", permissions: ["threads:write"], org: "acme" });
const rejects = async (p: Promise<unknown>) =>
  p.then(
    () => undefined,
    (e: unknown) => e,
  );

t.test("authenticate: string or object users, HTTPException statuses, other failures a bare 401", async (t) => {
  const req = new Request("http://127.0.0.1/threads", { headers: { authorization: "Bearer x" } });
  const seen: Request[] = [];
  const ok = handlersOf(new Auth().authenticate(async (r: Request) => (seen.push(r), "bob")));
  t.same(await authenticate(ok, req), { user: { identity: "bob", permissions: [], display_name: "bob", is_authenticated: true }, permissions: [] });
  t.equal(seen[0].headers.get("authorization"), "Bearer x", "receives the standard Request");

  const obj = handlersOf(new Auth().authenticate(() => ({ identity: "carol", permissions: ["a", "b"], email: "c@x" })));
  const ctx = await authenticate(obj, req);
  t.same(ctx.permissions, ["a", "b"]);
  t.equal(ctx.user.email, "c@x", "other fields are kept");
  t.equal(ctx.user.display_name, "carol");

  const denied = handlersOf(
    new Auth().authenticate(() => {
      throw new HTTPException(401, { message: "Bad token", headers: { "WWW-Authenticate": 'Bearer error="invalid_token"', "Content-Length": "5" } });
    }),
  );
  const e1 = (await rejects(authenticate(denied, req))) as AuthError;
  t.ok(e1 instanceof AuthError);
  t.same([e1.status, e1.detail, e1.headers], [401, "Bad token", { "WWW-Authenticate": 'Bearer error="invalid_token"' }], "framing headers dropped");

  const teapot = handlersOf(new Auth().authenticate(() => Promise.reject(new HTTPException(418))));
  const e2 = (await rejects(authenticate(teapot, req))) as AuthError;
  t.same([e2.status, e2.detail], [418, "I'm a Teapot"]);

  const logged: unknown[] = [];
  const leaky = handlersOf(
    new Auth().authenticate(() => {
      throw new Error("secret=hunter2");
    }),
  );
  const e3 = (await rejects(authenticate(leaky, req, (e) => logged.push(e)))) as AuthError;
  t.same([e3.status, e3.detail], [401, "Unauthorized"], "no detail leaked");
  t.equal(logged.length, 1, "but logged");

  for (const bad of [undefined, null, "", 42, { name: "no identity" }, { identity: 7 }]) {
    const h = handlersOf(new Auth().authenticate(() => bad as never));
    const e = (await rejects(authenticate(h, req))) as AuthError;
    t.equal(e.status, 401, `invalid user ${JSON.stringify(bad)} → 401`);
  }
});

t.test("handlers are matched from most to least specific, for every resource and action", async (t) => {
  const calls: string[] = [];
  const auth = new Auth()
    .on("threads:create", () => void calls.push("threads:create"))
    .on("threads", () => void calls.push("threads"))
    .on("*:read" as never, () => void calls.push("*:read"))
    .on("store:put", () => void calls.push("store:put"))
    .on("*", () => void calls.push("*"));
  const h = handlersOf(auth);
  const expected: Record<string, string> = {
    "threads:create": "threads:create",
    "threads:read": "threads",
    "threads:create_run": "threads",
    "assistants:read": "*:read",
    "crons:read": "*:read",
    "store:put": "store:put",
    "store:get": "*",
  };
  for (const [resource, actions] of Object.entries(AUTH_ACTIONS)) {
    for (const action of actions) {
      calls.length = 0;
      const value = { marker: `${resource}:${action}` };
      const result = await authorize(h, alice, resource as AuthResource, action, value);
      t.equal(result.value, value, `${resource}:${action} value passed through`);
      const want = expected[`${resource}:${action}`] ?? (resource === "threads" ? "threads" : action === "read" ? "*:read" : "*");
      t.same(calls, [want], `${resource}:${action} → ${want}`);
    }
  }
  t.equal(findHandler(handlersOf(new Auth()), "threads", "read"), undefined);
});

t.test("the handler receives user, permissions, action, resource and value; may change the value", async (t) => {
  let seen: Record<string, unknown> = {};
  const auth = new Auth().on("threads:create", (arg) => {
    seen = { ...arg };
    arg.value.metadata ??= {};
    arg.value.metadata.owner = arg.user.identity;
    return { owner: arg.user.identity };
  });
  const value: { metadata?: Record<string, unknown>; thread_id?: string } = { thread_id: "t1" };
  const result = await authorize(handlersOf(auth), alice, "threads", "create", value);
  t.same(result.value, { thread_id: "t1", metadata: { owner: "alice" } }, "the change is what gets stored");
  t.same(result.filters, { owner: "alice" });
  t.equal(seen.resource, "threads");
  t.equal(seen.action, "create");
  t.equal(seen.event, "threads:create");
  t.same(seen.permissions, ["threads:write"]);
  t.equal((seen.user as { org: string }).org, "acme");
});

t.test("results: nothing or true → no filters; false → 403; HTTPException → its status; bad filters → error", async (t) => {
  const run = (fn: () => unknown) =>
    authorize(handlersOf(new Auth().on("assistants:delete", fn as never)), alice, "assistants", "delete", { assistant_id: "a" });
  t.same((await run(() => undefined)).filters, undefined);
  t.same((await run(() => true)).filters, undefined);
  t.same((await run(() => ({}))).filters, undefined, "empty filters are no filters");
  t.same((await run(() => ({ team: { $contains: "x" } }))).filters, { team: { $contains: "x" } });
  const forbidden = (await rejects(run(() => false))) as AuthError;
  t.same([forbidden.status, forbidden.detail], [403, "Forbidden"]);
  const scopes = (await rejects(
    run(() => {
      throw new HTTPException(403, { message: "Missing scope assistants:write" });
    }),
  )) as AuthError;
  t.same([scopes.status, scopes.detail], [403, "Missing scope assistants:write"]);
  const gone = (await rejects(
    run(() => {
      throw new HTTPException(404);
    }),
  )) as AuthError;
  t.same([gone.status, gone.detail], [404, "Not Found"]);
  const bug = (await rejects(
    run(() => {
      throw new TypeError("oops");
    }),
  )) as Error;
  t.notOk(bug instanceof AuthError, "a bug in the handler stays a server error");
  const bad = (await rejects(run(() => ({ owner: { $in: ["a"] } })))) as Error;
  t.match(bad.message, /assistants:delete returned invalid filters: owner/);
  const weird = (await rejects(run(() => "owner"))) as Error;
  t.match(weird.message, /invalid filters/);
});

t.test("no auth configured, or no user: the value passes unchanged", async (t) => {
  const value = { metadata: {} };
  t.same(await authorize(undefined, alice, "threads", "read", value), { value, filters: undefined });
  const h = handlersOf(new Auth().on("*", () => false));
  t.same(await authorize(h, undefined, "threads", "read", value), { value, filters: undefined });
});

t.test("crons and store handlers run too (their routes do not exist yet)", async (t) => {
  const seen: string[] = [];
  const auth = new Auth()
    .on("crons:create", ({ value }) => {
      seen.push(`cron ${value.schedule}`);
      return { owner: "alice" };
    })
    .on("store", ({ value, action }) => {
      seen.push(`${action} ${JSON.stringify(value.namespace)}`);
      if (action === "delete") throw new HTTPException(403);
    });
  const h = handlersOf(auth);
  t.same((await authorize(h, alice, "crons", "create", { schedule: "* * * * *" })).filters, { owner: "alice" });
  for (const action of AUTH_ACTIONS.store.filter((a) => a !== "delete")) await authorize(h, alice, "store", action, { namespace: ["alice"], key: "k" });
  t.equal(((await rejects(authorize(h, alice, "store", "delete", { namespace: ["bob"], key: "k" }))) as AuthError).status, 403);
  t.same(seen, ["cron * * * * *", 'put ["alice"]', 'get ["alice"]', 'search ["alice"]', 'list_namespaces ["alice"]', 'delete ["bob"]']);
});
