import path from "node:path";
import t from "tap";
import { Client } from "@langchain/langgraph-sdk";
import { fileURLToPath } from "node:url";
import { startTestServer } from "../support/server.js";
import { signToken } from "../auth/jwt.js";

/** Custom auth on crons and on the webhook delivery log: each user sees and changes only their own. */

const AUTH_PROJECT = path.join(path.join(path.dirname(fileURLToPath(import.meta.url)), ".."), "auth", "langgraph.json");
const SCOPES = ["threads:read", "threads:write", "assistants:read", "crons:read", "crons:write"];

t.test("crons and webhook logs under custom auth", async (t) => {
  const srv = await startTestServer({ env: { LANGGRAPH_JSON: AUTH_PROJECT } });
  t.teardown(() => srv.close());
  const as = async (user: string) => new Client({ apiUrl: srv.url, defaultHeaders: { authorization: `Bearer ${await signToken(user, SCOPES)}` } });
  const alice = await as("alice");
  const bob = await as("bob");

  const cron = await alice.crons.create("agent", { schedule: "0 0 * * *", metadata: { tag: "a" } });
  t.match(cron.metadata, { tag: "a", owner: "alice" }, "the handler's metadata is stored");
  t.equal((await alice.crons.search()).length, 1);
  t.same(await bob.crons.search(), [], "bob does not see alice's cron");
  t.equal(await bob.crons.count(), 0);
  await t.rejects(bob.crons.update(cron.cron_id, { enabled: false }), /404/);
  await t.rejects(bob.crons.delete(cron.cron_id), /404/);
  t.match(await alice.crons.update(cron.cron_id, { enabled: false }), { enabled: false });
  const readOnly = new Client({ apiUrl: srv.url, defaultHeaders: { authorization: `Bearer ${await signToken("carol", ["crons:read"])}` } });
  await t.rejects(readOnly.crons.create("agent", { schedule: "* * * * *" }), /403/);

  const thread = await alice.threads.create();
  const run = await alice.runs.create(thread.thread_id, "agent", { input: { messages: [{ role: "user", content: "x" }] } });
  const mine = await fetch(`${srv.url}/runs/${run.run_id}/webhooks`, { headers: { authorization: `Bearer ${await signToken("alice", SCOPES)}` } });
  t.equal(mine.status, 200);
  const theirs = await fetch(`${srv.url}/runs/${run.run_id}/webhooks`, { headers: { authorization: `Bearer ${await signToken("bob", SCOPES)}` } });
  t.equal(theirs.status, 404, "bob cannot read alice's delivery log");
  const threadForm = await fetch(`${srv.url}/threads/${thread.thread_id}/runs/${run.run_id}/webhooks`, {
    headers: { authorization: `Bearer ${await signToken("bob", SCOPES)}` },
  });
  t.equal(threadForm.status, 404);
  await alice.crons.delete(cron.cron_id);
});
