import t from "tap";
import { startTestServer } from "../support/server.js";

/**
 * A run's outputs written by this process go to SSE as the JSON text the store holds, unparsed; after a restart
 * the same outputs are read from the table and serialised again. Both must be the same bytes, whatever the
 * graph's output holds (quotes, backslashes, line and paragraph separators, astral characters, subgraph names).
 */

const tricky = 'q"uote \\back\\slash \n newline \u2028\u2029 tab\t emoji 😀 nul-ish \u0001 "__large_json__" </script>';

async function rawBody(res: Response): Promise<string> {
  if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  return await res.text();
}

t.test("live SSE (stored text) and a join after a restart (parsed from the table) send the same bytes", async (t) => {
  let srv = await startTestServer();
  t.teardown(() => srv.close());
  const cases = [
    { assistant_id: "agent", stream_mode: ["values", "updates", "messages-tuple", "debug"] },
    { assistant_id: "custom", stream_mode: ["custom", "messages-tuple", "tasks", "checkpoints", "values"] },
    { assistant_id: "subgraph", stream_mode: ["values", "updates", "messages-tuple"], stream_subgraphs: true },
  ];
  const live: { threadId: string; runId: string; body: string }[] = [];
  for (const c of cases) {
    const thread = (await (await fetch(`${srv.url}/threads`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })).json()) as {
      thread_id: string;
    };
    const res = await fetch(`${srv.url}/threads/${thread.thread_id}/runs/stream`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ ...c, input: { messages: [{ role: "user", content: tricky }] } }),
    });
    const runId = /\/runs\/([0-9a-f-]{36})/.exec(res.headers.get("content-location") ?? "")?.[1];
    t.ok(runId, `${c.assistant_id}: the run's location`);
    const body = await rawBody(res);
    t.ok(body.includes(JSON.stringify(tricky).slice(1, -1)), `${c.assistant_id}: the output carries the input as JSON escapes it`);
    live.push({ threadId: thread.thread_id, runId: runId!, body });
  }
  srv = await srv.restart();
  for (const [i, run] of live.entries()) {
    const joined = await rawBody(await fetch(`${srv.url}/threads/${run.threadId}/runs/${run.runId}/stream`, { headers: { "Last-Event-ID": "-1" } }));
    t.equal(joined, run.body, `${cases[i]!.assistant_id}: the same bytes`);
  }
});
