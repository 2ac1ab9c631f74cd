import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import t from "tap";
import { openSqliteStore } from "../src/eventstore/sqlite.js";
import { withSchemas } from "../src/eventstore/validating.js";
import { withAppend } from "../src/eventstore/forwarding.js";
import { schemaForEventType } from "../src/domain/events.js";
import { openReadModels } from "../src/read-models/all.js";
import { EventSourcedCheckpointSaver } from "../src/runtime/checkpointer.js";
import { loadLanggraphConfig } from "../src/langgraph-config.js";
import { loadGraphRegistry } from "../src/runtime/graphs.js";
import { loadConfig } from "../src/config.js";
import type { AppContext } from "../src/app/context.js";
import { isoNow } from "../src/util/time.js";
import { ensureDefaultAssistants } from "../src/app/assistants.js";
import { RunsService } from "../src/app/runs.js";
import { createThread } from "../src/app/threads.js";
import { RunWorker } from "../src/runtime/worker.js";
import { runStream } from "../src/domain/runs.js";
import { threadStream } from "../src/domain/threads.js";
import { TEST_GRAPHS } from "./support/server.js";
import { SYSTEM_CALLER } from "../src/app/auth/caller.js";

/**
 * The end of a run: its last checkpoint writes (which the run did not wait for), its outputs, its
 * RunEnded and its thread's RunFinished mark go into the log in one transaction, and the end is
 * never written without the writes: a write the log refuses ends the run with that error.
 */
t.test("a run's end", async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), "agent-server-run-end-"));
  const sqlite = await openSqliteStore({ path: path.join(dir, "events.sqlite"), synchronous: "NORMAL" });
  // Refuses the pending writes of the threads named here, as a log that cannot take them would.
  const refusing = new Set<string>();
  let transactionsAtClaim: number | undefined;
  const store = withAppend(withSchemas(sqlite, schemaForEventType), async (stream, events, expected, options) => {
    if (events.some((e) => e.type === "PendingWritesSaved") && refusing.has(stream.slice("checkpoints-".length))) throw new Error("the log is full");
    const result = await sqlite.append(stream, events, expected, options);
    if (events.some((e) => e.type === "RunClaimed")) transactionsAtClaim = sqlite.stats().transactions;
    return result;
  });
  const readModels = openReadModels(dir);
  await readModels.runner.start(store);
  const checkpointer = new EventSourcedCheckpointSaver({ store });
  const langgraph = await loadLanggraphConfig(TEST_GRAPHS);
  const graphs = await loadGraphRegistry(langgraph.config, langgraph.baseDir, { graphDefaults: {} });
  const ctx: AppContext = { config: loadConfig({ DATA_DIR: dir }), langgraph, store, readModels, graphs: graphs.catalogue, runtime: async () => ({ graphs, checkpointer }), now: isoNow };
  await ensureDefaultAssistants(ctx, graphs.defaultAssistants());
  const completion = { store, readModels, now: isoNow };
  const runs = new RunsService(ctx, completion);
  const worker = new RunWorker({ ...completion, graphs, checkpointer, maxConcurrentRuns: 2, exclusiveStore: true, owner: "local" });
  await worker.start();
  t.teardown(async () => {
    await worker.stop();
    runs.close();
    await readModels.runner.close();
    await sqlite.close();
    await rm(dir, { recursive: true, force: true });
  });
  const runOn = async (threadId: string, content: string) => {
    const run = await runs.create(await runs.authorize(SYSTEM_CALLER, threadId, { assistant_id: "agent", input: { messages: [{ role: "user", content }] }, on_completion: "keep" } as never));
    await runs.waitDone(run.run_id);
    return { run, events: await store.readStream(runStream(run.run_id)), marks: (await store.readStream(threadStream(threadId))).filter((e) => e.type === "RunFinished") };
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
