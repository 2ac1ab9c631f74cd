import t from "tap";
import { gates } from "../support/gates.js";
import { startTestServer } from "../support/server.js";

/**
 * What a waiter reads of a run on each wake-up (`doneness`, without parsing the run's record) says what the whole
 * view says: its thread, whether that thread marked it finished, whether the thread is a temporary one.
 */
t.test("a run's doneness agrees with its full view while it runs and once it ended, on a thread and on a temporary thread", async (t) => {
  const srv = await startTestServer();
  t.teardown(() => srv.close());
  const gate = gates(t);
  const runs = srv.server.readModels.runs;
  const asViewed = (runId: string) => {
    const v = runs.load(runId);
    return v && { threadId: v.run.thread_id, threadFinished: v.threadFinished, temporary: v.run.kwargs.temporary };
  };

  t.equal(runs.doneness("00000000-0000-4000-8000-000000000000"), undefined, "no such run");

  // Held in its node by a gate: the run is in flight, its thread has not marked it finished.
  const thread = await srv.client.threads.create();
  const held = await srv.client.runs.create(thread.thread_id, "delay", { input: { gate: gate.path("threaded") } });
  t.same(runs.doneness(held.run_id), { threadId: thread.thread_id, threadFinished: false, temporary: false }, "in flight");
  t.same(runs.doneness(held.run_id), asViewed(held.run_id));
  gate.open("threaded");
  await srv.client.runs.join(thread.thread_id, held.run_id);
  // The join is answered from the log once the run's end is durable; the tables fold it by the end of that turn of
  // the event loop, or when the next request comes in. Read directly, in this process, they are settled first.
  srv.server.readModels.runner.settle();
  t.same(runs.doneness(held.run_id), { threadId: thread.thread_id, threadFinished: true, temporary: false }, "ended");
  t.same(runs.doneness(held.run_id), asViewed(held.run_id));

  // Stateless runs: temporary when their thread is deleted on completion, not when it is kept.
  const deleted = await srv.client.runs.create(null, "delay", { input: { gate: gate.path("stateless") } });
  // The JS SDK types on_completion as the Python names; the API's own values go over plain HTTP.
  const keptReply = await fetch(`${srv.url}/runs`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ assistant_id: "delay", input: { gate: gate.path("stateless") }, on_completion: "keep" }),
  });
  t.equal(keptReply.status, 200);
  const kept = (await keptReply.json()) as { run_id: string; thread_id: string };
  t.same(runs.doneness(deleted.run_id), { threadId: deleted.thread_id, threadFinished: false, temporary: true });
  t.same(runs.doneness(kept.run_id), { threadId: kept.thread_id, threadFinished: false, temporary: false });
  t.same(runs.doneness(deleted.run_id), asViewed(deleted.run_id));
  gate.open("stateless");
  await srv.client.runs.join(kept.thread_id, kept.run_id);
  srv.server.readModels.runner.settle();
  t.same(runs.doneness(kept.run_id), { threadId: kept.thread_id, threadFinished: true, temporary: false });
});
