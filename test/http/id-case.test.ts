import t from "tap";
import { startTestServer } from "../support/server.js";

/**
 * UUIDs are case-insensitive: every edge accepts an id in capitals and answers with the canonical
 * lower-case id, whether the id names something that exists or something the request creates.
 */

t.test("ids in capitals reach the same thread, run, cron and assistant on every edge", async (t) => {
  const srv = await startTestServer();
  t.teardown(() => srv.close());
  const { client, url } = srv;
  const json = { "content-type": "application/json" };
  const post = (path: string, body: unknown) => fetch(`${url}${path}`, { method: "POST", headers: json, body: JSON.stringify(body) });
  const up = (id: string) => id.toUpperCase();

  const assistant = await client.assistants.create({ graphId: "agent" });
  const thread = await client.threads.create();
  const run = await client.runs.wait(thread.thread_id, assistant.assistant_id, { input: { messages: [] } });
  t.ok(run);
  const [runInfo] = await client.runs.list(thread.thread_id);

  t.test("created with an id in capitals: stored and answered lower-case", async (t) => {
    const wanted = "0193A6B2-7C1D-7E2F-8A3B-4C5D6E7F8A9B";
    const res = await post("/threads", { thread_id: wanted });
    t.equal(res.status, 200);
    t.equal(((await res.json()) as { thread_id: string }).thread_id, wanted.toLowerCase());
    t.equal((await client.threads.get(wanted.toLowerCase())).thread_id, wanted.toLowerCase());
    const again = await post("/threads", { thread_id: wanted, if_exists: "raise" });
    t.equal(again.status, 409, "the same thread, whatever the case");

    const assistantId = "0193A6B2-7C1D-7E2F-8A3B-4C5D6E7F8A9C";
    const made = await post("/assistants", { assistant_id: assistantId, graph_id: "agent" });
    t.equal(made.status, 200);
    t.equal(((await made.json()) as { assistant_id: string }).assistant_id, assistantId.toLowerCase());
  });

  t.test("REST paths and bodies", async (t) => {
    const got = await fetch(`${url}/threads/${up(thread.thread_id)}`);
    t.equal(got.status, 200);
    t.equal(((await got.json()) as { thread_id: string }).thread_id, thread.thread_id);
    t.equal((await fetch(`${url}/threads/${up(thread.thread_id)}/state`)).status, 200);
    t.equal((await post(`/threads/${up(thread.thread_id)}/history`, {})).status, 200);
    const runGot = await fetch(`${url}/threads/${up(thread.thread_id)}/runs/${up(runInfo.run_id)}`);
    t.equal(runGot.status, 200);
    t.equal(((await runGot.json()) as { run_id: string }).run_id, runInfo.run_id);
    t.equal((await fetch(`${url}/threads/${up(thread.thread_id)}/runs`)).status, 200);
    const joined = await fetch(`${url}/threads/${up(thread.thread_id)}/runs/${up(runInfo.run_id)}/join`);
    t.equal(joined.status, 200);
    t.equal((await fetch(`${url}/assistants/${up(assistant.assistant_id)}`)).status, 200);
    const searched = await post("/threads/search", { ids: [up(thread.thread_id)] });
    t.same(
      ((await searched.json()) as { thread_id: string }[]).map((x) => x.thread_id),
      [thread.thread_id],
    );
    const events = await fetch(`${url}/threads/${up(thread.thread_id)}/events?run_id=${up(runInfo.run_id)}`);
    t.equal(events.status, 200);

    const created = await post(`/threads/${up(thread.thread_id)}/runs/wait`, { assistant_id: up(assistant.assistant_id), input: { messages: [] } });
    t.equal(created.status, 200);
    const runs = await client.runs.list(thread.thread_id);
    t.equal(runs.length, 2, "the second run is on the same thread");
    t.ok(
      runs.every((r) => r.assistant_id === assistant.assistant_id),
      "and of the same assistant",
    );
  });

  t.test("crons", async (t) => {
    const made = await post(`/threads/${up(thread.thread_id)}/runs/crons`, { assistant_id: assistant.assistant_id, schedule: "0 0 1 1 *" });
    t.equal(made.status, 200);
    const cron = (await made.json()) as { cron_id: string; thread_id: string };
    t.equal(cron.thread_id, thread.thread_id);
    const found = await post("/runs/crons/search", { thread_id: up(thread.thread_id) });
    t.same(
      ((await found.json()) as { cron_id: string }[]).map((c) => c.cron_id),
      [cron.cron_id],
    );
    const gone = await fetch(`${url}/runs/crons/${up(cron.cron_id)}`, { method: "DELETE" });
    t.ok(gone.status === 200 || gone.status === 204, `deleted: ${gone.status}`);
  });

  t.test("protocol v2 commands", async (t) => {
    const res = await post(`/threads/${up(thread.thread_id)}/commands`, { id: 1, method: "agent.getTree", params: {} });
    t.equal(res.status, 200);
    const body = (await res.json()) as { type: string; meta?: { thread_id?: string } };
    t.not(body.type, "error", JSON.stringify(body));
  });
});
