import t from "tap";
import { createThread, threadState } from "../../src/app/threads.js";
import { threadLifecycle } from "../../src/app/thread-lifecycle.js";
import { RunWorker } from "../../src/runtime/worker.js";
import { threadStream } from "../../src/domain/threads.js";
import { checkpointStream } from "../../src/domain/checkpoint-events.js";
import { SYSTEM_CALLER } from "../../src/app/auth/caller.js";
import { inProcessCore } from "../support/in-process-core.js";

/**
 * A stateless run's temporary thread is deleted when the run ends, the way every thread is deleted
 * (the lifecycle's decider, its checkpoints with it), and only while it is still that run's: not a
 * newer incarnation of the id, not a thread another run is active on.
 */
t.test("temporary threads", async (t) => {
  const core = await inProcessCore();
  const { ctx, runs, store } = core;
  const lifecycle = threadLifecycle(ctx);
  t.teardown(() => core.close());
  const types = async (stream: string) => (await store.readStream(stream)).map((e) => e.type);

  t.test("a stateless run's thread goes when the run ends, with its checkpoints", async (t) => {
    const worker = new RunWorker({
      ...core.completion,
      graphs: core.graphs,
      checkpointer: core.checkpointer,
      maxConcurrentRuns: 1,
      exclusiveStore: true,
      owner: "w",
    });
    await worker.start();
    t.teardown(() => worker.stop());
    const run = await runs.create(
      await runs.authorize(SYSTEM_CALLER, null, { assistant_id: "agent", input: { messages: [{ role: "user", content: "hi" }] } } as never),
    );
    await runs.lifecycle.waitDone(run.run_id);
    t.equal(threadState(ctx, run.thread_id), undefined, "the thread is gone from the read model");
    t.same((await types(threadStream(run.thread_id))).slice(-2), ["RunFinished", "ThreadDeleted"], "deleted after the run's mark");
    // The checkpoints go after the thread (the lifecycle's order): awaited as the event they are.
    const subscription = store.subscribeToStream(checkpointStream(run.thread_id), { fromRevision: "start" });
    for await (const item of subscription) if (item.kind === "event" && item.event.type === "CheckpointsDeleted") break;
    await subscription.close();
    t.equal((await types(checkpointStream(run.thread_id))).at(-1), "CheckpointsDeleted", "its checkpoints with it");
  });

  t.test("a newer incarnation of the id (created after the run) stays", async (t) => {
    const thread = await createThread(ctx, { metadata: {}, if_exists: "raise" });
    await lifecycle.deleteTemporary(thread.thread_id, "2000-01-01T00:00:00.000+00:00");
    t.ok(threadState(ctx, thread.thread_id), "still there");
    t.notOk((await types(threadStream(thread.thread_id))).includes("ThreadDeleted"), "nothing appended");
    await lifecycle.deleteTemporary(thread.thread_id, ctx.now());
    t.equal(threadState(ctx, thread.thread_id), undefined, "the run's own thread (created before it) goes");
  });

  t.test("a thread another run is active on stays, and that run is not cancelled", async (t) => {
    const thread = await createThread(ctx, { metadata: {}, if_exists: "raise" });
    // No worker here: the run stays pending, active on the thread.
    const pending = await runs.create(await runs.authorize(SYSTEM_CALLER, thread.thread_id, { assistant_id: "agent", input: {} } as never));
    await lifecycle.deleteTemporary(thread.thread_id, ctx.now());
    t.ok(threadState(ctx, thread.thread_id), "still there");
    t.equal(runs.view(pending.run_id)?.stream.ended, undefined, "the pending run is not ended");
  });
});
