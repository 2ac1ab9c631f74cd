import t from "tap";
import { withAppend } from "../../src/eventstore/forwarding.js";
import { createThread } from "../../src/app/threads.js";
import { RunWorker } from "../../src/runtime/worker.js";
import { runStream } from "../../src/domain/runs.js";
import { threadStream } from "../../src/domain/threads.js";
import { SYSTEM_CALLER } from "../../src/app/auth/caller.js";
import { inProcessCore } from "../support/in-process-core.js";

/**
 * The end of a run: its last checkpoint writes (which the run did not wait for), its outputs, its
 * RunEnded and its thread's RunFinished mark go into the log in one transaction, and the end is
 * never written without the writes: a write the log refuses ends the run with that error.
 */
t.test("a run's end", async (t) => {
  // Refuses the pending writes of the threads named here, as a log that cannot take them would.
  const refusing = new Set<string>();
  let transactionsAtClaim: number | undefined;
  const core = await inProcessCore({
    wrap: (checked, sqlite) =>
      withAppend(checked, async (stream, events, expected, options) => {
        if (events.some((e) => e.type === "PendingWritesSaved") && refusing.has(stream.slice("checkpoints-".length))) throw new Error("the log is full");
        const result = await checked.append(stream, events, expected, options);
        if (events.some((e) => e.type === "RunClaimed")) transactionsAtClaim = sqlite.stats().transactions;
        return result;
      }),
  });
  const { store, sqlite, ctx, runs } = core;
  const worker = new RunWorker({
    ...core.completion,
    graphs: core.graphs,
    checkpointer: core.checkpointer,
    maxConcurrentRuns: 2,
    exclusiveStore: true,
    owner: "local",
  });
  await worker.start();
  t.teardown(async () => {
    await worker.stop();
    await core.close();
  });
  const runOn = async (threadId: string, content: string) => {
    const run = await runs.create(
      await runs.authorize(SYSTEM_CALLER, threadId, {
        assistant_id: "agent",
        input: { messages: [{ role: "user", content }] },
        on_completion: "keep",
      } as never),
    );
    await runs.lifecycle.waitDone(run.run_id);
    return {
      run,
      events: await store.readStream(runStream(run.run_id)),
      marks: (await store.readStream(threadStream(threadId))).filter((e) => e.type === "RunFinished"),
    };
  };

  t.test("its last checkpoint writes, outputs, end and mark: one transaction after the claim's", async (t) => {
    const thread = await createThread(ctx, { metadata: {}, if_exists: "raise" });
    transactionsAtClaim = undefined;
    const { events, marks } = await runOn(thread.thread_id, "hello");
    t.equal(events.at(-1)?.type, "RunEnded");
    t.match(events.at(-1)?.data, { status: "success" });
    t.equal(marks.length, 1, "the thread is marked");
    const checkpoints = (await store.readStream(`checkpoints-${thread.thread_id}`)).filter((e) => e.type === "CheckpointSaved");
    t.ok(checkpoints.length >= 2, "the run saved its checkpoints");
    t.ok(transactionsAtClaim !== undefined);
    t.equal(sqlite.stats().transactions - transactionsAtClaim!, 1, "everything after the claim went into one transaction");
    t.ok(checkpoints.at(-1)!.position < events.at(-1)!.position && events.at(-1)!.position < marks[0].position, "in the order writes, end, mark");
  });

  t.test("a checkpoint write the log refuses ends the run with that error, and is not left for the thread's next run", async (t) => {
    const thread = await createThread(ctx, { metadata: {}, if_exists: "raise" });
    refusing.add(thread.thread_id);
    const failed = await runOn(thread.thread_id, "first");
    const ends = failed.events.filter((e) => e.type === "RunEnded");
    t.equal(ends.length, 1, "one end");
    t.match(ends[0].data, { status: "error", error: { message: /the log is full/ } }, "an error naming the refusal");
    t.match(failed.marks.at(-1)?.data, { run_id: failed.run.run_id, status: "error" }, "the thread's mark says error, never success");
    refusing.delete(thread.thread_id);
    const next = await runOn(thread.thread_id, "second");
    t.match(next.events.at(-1)?.data, { status: "success" }, "the next run on the thread succeeds");
  });
});
