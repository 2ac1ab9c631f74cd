import { subscribe, unsubscribe } from "node:diagnostics_channel";
import t from "tap";
import { CRITICAL_PATH_CHANNEL } from "../../src/util/trace-points.js";
import { startTestServer } from "../support/server.js";

/**
 * A /wait answers only at its run's end, so once its run is created the rest of its handling (the route's,
 * up to registering its wait) yields to the run's graph: it resumes when the event loop turns, after the
 * run's end is committed, while that commit is synced (where the main thread would only wait). Seen
 * through the server's trace points (src/util/trace-points.ts). The example graph never yields to the event
 * loop in between, so the order is fixed.
 */
t.test("a /wait's handling after creating its run resumes only once the run's end is committed", async (t) => {
  const srv = await startTestServer();
  t.teardown(() => srv.close());
  const points: string[] = [];
  const listener = (name: unknown) => points.push(String(name));
  subscribe(CRITICAL_PATH_CHANNEL, listener);
  t.teardown(() => unsubscribe(CRITICAL_PATH_CHANNEL, listener));

  for (let i = 0; i < 3; i++) {
    const thread = await srv.client.threads.create();
    points.length = 0;
    const values = (await srv.client.runs.wait(thread.thread_id, "agent", { input: { messages: [{ role: "user", content: "hello" }] } })) as {
      messages: { content: string }[];
    };
    t.equal(values.messages.at(-1)?.content, "You said: hello", "the run's answer");
    const at = (name: string) => points.indexOf(name);
    for (const name of ["wait.route", "graph.start", "graph.end", "run.end.committed", "wait.created", "wait.result", "wait.answered"])
      t.ok(at(name) >= 0, `${name} was seen`);
    t.ok(at("wait.route") < at("graph.start"), "the route created the run before its graph started");
    t.ok(at("wait.created") > at("run.end.committed"), `the route went on only after the run's end was committed: ${points.join(", ")}`);
    t.ok(at("wait.created") < at("wait.result") && at("wait.result") < at("wait.answered"), "then waited for the result and answered");
  }
});
