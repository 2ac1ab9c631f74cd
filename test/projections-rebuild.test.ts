import t from "tap";
import { ProjectionRunner } from "../src/projections/runner.js";
import { allProjections } from "../src/projections/all.js";
import { EventSourcedCheckpointSaver } from "../src/runtime/checkpointer.js";
import { describeThread } from "../projections/checkpoints.js";
import { startTestServer } from "./support/server.js";

/** Read models are projections of the log: a rebuild from position 0 equals the live one. */

t.test("rebuilding every read model from position 0 gives the live read model", async (t) => {
  const srv = await startTestServer();
  t.teardown(() => srv.close());
  const { client } = srv;
  const a = await client.assistants.create({ graphId: "agent", metadata: { v: 1 } });
  await client.assistants.update(a.assistant_id, { metadata: { v: 2 } });
  await client.assistants.setLatest(a.assistant_id, 1);
  const doomed = await client.assistants.create({ graphId: "agent" });
  await client.assistants.delete(doomed.assistant_id);
  const thread = await client.threads.create({ graphId: "agent", metadata: { k: "v" } });
  await client.threads.update(thread.thread_id, { metadata: { k2: 2 } });
  await client.threads.updateState(thread.thread_id, { values: { messages: [{ role: "user", content: "hi" }] }, asNode: "agent" });
  await client.runs.wait(thread.thread_id, "agent", { input: { messages: [{ role: "user", content: "again" }] } });
  const copy = await client.threads.copy(thread.thread_id);
  const gone = await client.threads.create();
  await client.threads.delete(gone.thread_id);

  const live = srv.server.runner;
  const rebuilt = new ProjectionRunner(srv.server.store, allProjections);
  await rebuilt.start();
  t.teardown(() => rebuilt.stop());
  await rebuilt.waitFor(live.position);
  t.equal(rebuilt.position, live.position, "same position");
  t.same(rebuilt.snapshot(), live.snapshot(), "same read models");
  t.ok(Object.keys(live.snapshot().assistants).length > 7, "the comparison covers real data");

  // Checkpoints are not in the runner: they are folded per thread on demand. The live server's
  // cached state (built from its own appends) equals a fold of the stream by a fresh saver.
  const refolded = new EventSourcedCheckpointSaver({ store: srv.server.store });
  t.ok(srv.server.checkpointer.cache.has(thread.thread_id), "the run's thread is held, built from the server's own appends");
  for (const id of [thread.thread_id, copy.thread_id]) {
    const liveState = describeThread(await srv.server.checkpointer.cache.get(id));
    t.ok(liveState, `thread ${id} has checkpoints`);
    t.same(describeThread(await refolded.cache.get(id)), liveState, "same checkpoints when folded again");
  }
});

t.test("waitFor resolves only once the position is folded (read-your-writes)", async (t) => {
  const srv = await startTestServer();
  t.teardown(() => srv.close());
  const runner = srv.server.runner;
  const head = runner.position;
  let resolved = false;
  const waiting = runner.waitFor(head + 1n).then(() => (resolved = true));
  t.equal(resolved, false);
  await srv.client.threads.create();
  await waiting;
  t.equal(resolved, true);
  t.ok(runner.position > head);
});
