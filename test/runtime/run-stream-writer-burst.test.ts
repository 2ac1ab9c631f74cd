/**
 * A node that writes a burst of large custom chunks in one step: more than one append can hold,
 * pushed to the run's stream writer faster than the log takes them. Every chunk is written once, in
 * order, before the run's end; and whatever append of the writer fails, the run still ends.
 */
import { mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import t, { type Test } from "tap";
import { tempSqliteStore } from "../support/temp-sqlite-store.js";
import { withAppend } from "../../src/eventstore/forwarding.js";
import { AppendTicket, AppendTooLargeError, MAX_APPEND_SIZE, WrongExpectedVersionError, type EventData } from "../../src/eventstore/types.js";
import { CommandPipeline } from "../../src/commands/pipeline.js";
import { RunStreamWriter } from "../../src/runtime/run-stream-writer.js";
import { RunWorker } from "../../src/runtime/worker.js";
import { createThread } from "../../src/app/threads.js";
import { runStream } from "../../src/domain/runs.js";
import { SYSTEM_CALLER } from "../../src/app/auth/caller.js";
import { inProcessCore } from "../support/in-process-core.js";
import { repoRoot, startTestServer } from "../support/server.js";

const CHUNKS = 300;
const CHUNK_BYTES = 32 * 1024;

const output = (i: number): EventData => ({ type: "RunOutput", data: { event: "custom", data: { i, pad: "x".repeat(CHUNK_BYTES) } } });
const indexOf = (e: { data: unknown }) => (e.data as { data: { i: number } }).data.i;

const sqliteStore = (t: Test) => tempSqliteStore(t, "run-stream-writer-burst");

/** How the pushes of a burst reach the writer: all in one turn, or with the graph's stream between them. */
const pacings: Record<string, (i: number) => Promise<void> | undefined> = {
  "in one turn": () => undefined,
  "a few microtasks apart": async () => {
    for (let k = 0; k < 4; k++) await Promise.resolve();
  },
  "a turn of the event loop now and then": (i) => (i % 7 === 0 ? new Promise<void>((resolve) => setImmediate(resolve)) : undefined),
};

t.test("a burst larger than one append: written in order, with the end after it", async (t) => {
  for (const [name, pace] of Object.entries(pacings)) {
    for (const finishWhen of ["at once", "after a drain"] as const) {
      t.test(`${name}, finished ${finishWhen}`, async (t) => {
        const store = await sqliteStore(t);
        const stream = "run-burst";
        const claimed = await store.append(stream, [{ type: "RunClaimed", data: {} }], "no_stream");
        const writer = new RunStreamWriter(new CommandPipeline(store), stream, claimed.nextExpectedRevision);
        const pushed: EventData[] = [];
        for (let i = 0; i < CHUNKS; i++) {
          pushed.push(output(i));
          // The first and last are tracked (their revisions are remembered), the rest are not, as a run's tokens.
          writer.push(pushed[i], i === 0 || i === CHUNKS - 1);
          await pace(i);
        }
        if (finishWhen === "after a drain") await writer.drain();
        const last = await writer.finish([{ type: "RunEnded", data: {} }], { urgent: true });

        const events = await store.readStream(stream);
        t.equal(events.length, CHUNKS + 2, "the claim, every chunk once, the end");
        t.same(
          events.slice(1, -1).map(indexOf),
          pushed.map((_, i) => i),
          "the chunks in the order pushed",
        );
        t.equal(events.at(-1)?.type, "RunEnded", "the end comes last");
        t.equal(last, events.at(-1)?.revision, "finish() returns the end's revision");
        t.equal(writer.revision, last);
        t.equal(await writer.revisionOf(pushed[0]), 1n, "a tracked chunk's revision is known");
        t.equal(await writer.revisionOf(pushed[CHUNKS - 1]), BigInt(CHUNKS));
        t.equal(await writer.revisionOf(pushed[1]), undefined, "an untracked chunk's is not kept");
      });
    }
  }
});

t.test("an end that depends on a write refused as too large is refused, not written in parts without it", async (t) => {
  for (const finishWhen of ["at once", "after a drain"] as const)
    t.test(`finished ${finishWhen}`, (t) => endAfterRefusedWrite(t, finishWhen === "after a drain"));
});

async function endAfterRefusedWrite(t: Test, drainFirst: boolean): Promise<void> {
  const store = await sqliteStore(t);
  const stream = "run-dependent";
  const claimed = await store.append(stream, [{ type: "RunClaimed", data: {} }], "no_stream");
  const writer = new RunStreamWriter(new CommandPipeline(store), stream, claimed.nextExpectedRevision);
  const checkpoint = new AppendTicket();
  await t.rejects(store.append("checkpoints-x", [{ type: "E", data: "x".repeat(MAX_APPEND_SIZE) }], "any", { ticket: checkpoint }), AppendTooLargeError);
  for (let i = 0; i < 3; i++) writer.push(output(i));
  if (drainFirst) await writer.drain();
  await t.rejects(writer.finish([{ type: "RunEnded", data: {} }], { urgent: true, after: [checkpoint] }), {
    name: "AppendTooLargeError",
    stream: "checkpoints-x",
  });
  await writer.drain();
  const events = await store.readStream(stream);
  t.notOk(
    events.some((e) => e.type === "RunEnded"),
    "no end without the write it depends on",
  );
  t.same(events.slice(1).map(indexOf), [0, 1, 2], "the outputs are written");
}

t.test("a writer whose append another writer beat still lets the run end", async (t) => {
  // The run's outputs meet a conflict the writer cannot settle (as if another process had written
  // to the run): the writer fails, and the run must still end, with an error, never stay running.
  const core = await inProcessCore({
    wrap: (checked) =>
      withAppend(checked, async (stream, events, expected, options) => {
        // The outputs after the claim's append (which carries the run's first output with it).
        if (stream.startsWith("run-") && events.some((e) => e.type === "RunOutput") && !events.some((e) => e.type === "RunClaimed")) {
          const error = new WrongExpectedVersionError(stream, expected ?? "any", 0n);
          options?.ticket?.failed(error);
          throw error;
        }
        return checked.append(stream, events, expected, options);
      }),
  });
  const worker = new RunWorker({
    ...core.completion,
    graphs: core.graphs,
    checkpointer: core.checkpointer,
    maxConcurrentRuns: 1,
    exclusiveStore: true,
    owner: "local",
  });
  await worker.start();
  t.teardown(async () => {
    await worker.stop();
    await core.close();
  });
  const thread = await createThread(core.ctx, { metadata: {}, if_exists: "raise" });
  const request = await core.runs.authorize(SYSTEM_CALLER, thread.thread_id, {
    assistant_id: "agent",
    input: { messages: [{ role: "user", content: "hello" }] },
    on_completion: "keep",
  } as never);
  const run = await core.runs.create(request);
  await core.runs.lifecycle.waitDone(run.run_id);
  const events = await core.store.readStream(runStream(run.run_id));
  const ends = events.filter((e) => e.type === "RunEnded");
  t.equal(ends.length, 1, "the run ended, once");
  t.match(ends[0].data, { status: "error" }, "with an error");
});

const BURST_GRAPH = `
import { END, START, StateGraph, Annotation, type LangGraphRunnableConfig } from "@langchain/langgraph";

const State = Annotation.Root({ done: Annotation<boolean> });

export const graph = new StateGraph(State)
  .addNode("burst", (_state: typeof State.State, config: LangGraphRunnableConfig) => {
    const pad = "x".repeat(${CHUNK_BYTES});
    for (let i = 0; i < ${CHUNKS}; i++) config.writer?.({ i, pad });
    return { done: true };
  })
  .addEdge(START, "burst")
  .addEdge("burst", END)
  .compile();
`;

t.test("through a server: a run emitting the burst succeeds and a reader gets every chunk in order", async (t) => {
  const project = await mkdtemp(path.join(tmpdir(), "agent-server-burst-"));
  t.teardown(() => rm(project, { recursive: true, force: true }));
  await writeFile(path.join(project, "package.json"), JSON.stringify({ name: "burst", private: true, type: "module" }));
  await writeFile(path.join(project, "langgraph.json"), JSON.stringify({ graphs: { burst: "./graph.ts:graph" } }));
  await symlink(path.join(repoRoot, "node_modules"), path.join(project, "node_modules"), "dir");
  await writeFile(path.join(project, "graph.ts"), BURST_GRAPH);
  const srv = await startTestServer({ env: { LANGGRAPH_JSON: path.join(project, "langgraph.json") } });
  t.teardown(() => srv.close());
  const { client } = srv;

  const thread = await client.threads.create();
  const parts: { event: string; data: unknown }[] = [];
  for await (const part of client.runs.stream(thread.thread_id, "burst", { input: {}, streamMode: "custom" })) parts.push(part);
  const custom = parts.filter((p) => p.event === "custom").map((p) => (p.data as { i: number }).i);
  t.same(
    custom,
    Array.from({ length: CHUNKS }, (_, i) => i),
    "every chunk, once, in order",
  );
  t.notOk(
    parts.some((p) => p.event === "error"),
    "no error",
  );
  const [run] = await client.runs.list(thread.thread_id);
  t.equal(run.status, "success", "the run succeeded");
  t.same(await client.runs.join(thread.thread_id, run.run_id), { done: true }, "join answers");

  // Joining the stream afterwards replays the same chunks from the log.
  const replayed: number[] = [];
  for await (const part of client.runs.joinStream(thread.thread_id, run.run_id, { lastEventId: "-1", streamMode: "custom" }))
    if (part.event === "custom") replayed.push((part.data as { i: number }).i);
  t.same(replayed, custom, "a later reader gets the same chunks in the same order");
});
