import type { IncomingMessage, ServerResponse } from "node:http";
import { randomUUID } from "node:crypto";
import t, { type Test } from "tap";
import { threadStream } from "../../src/domain/threads.js";
import type { RecordedEvent } from "../../src/eventstore/types.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { gates } from "../support/gates.js";
import { logWithReadModels } from "../support/log-with-read-models.js";
import { fetchJson } from "../support/http.js";

/**
 * A run's result (/wait, /join) is read from the log, so it is answered as soon as the run's end is
 * durable, before the read models fold it. A request served after that answer still finds the run
 * done: what the log delivered is folded before any request is served (CatchUpRunner.settle).
 */

t.test("delivered events reach onDelivered before the tables show them; settle folds them at once", async (t) => {
  const { store, readModels: models } = await logWithReadModels(t, "answer-before-fold-", { synchronous: "NORMAL" });

  const id = randomUUID();
  const seen: { delivered: boolean; afterSettle: boolean; appliedBefore: boolean }[] = [];
  let applied = false;
  models.runner.onApplied((event) => {
    if (event.streamId === threadStream(id)) applied = true;
  });
  const delivered = new Promise<RecordedEvent>((resolve) => {
    models.runner.onDelivered((event) => {
      if (event.streamId !== threadStream(id)) return;
      const appliedBefore = applied;
      const inTable = models.threads.load(id) !== undefined;
      // Still in this turn of the event loop, before the fold that was scheduled for its end.
      queueMicrotask(() => {
        const before = models.threads.load(id) !== undefined;
        models.runner.settle();
        seen.push({ delivered: inTable || before, afterSettle: models.threads.load(id) !== undefined, appliedBefore });
        resolve(event);
      });
    });
  });
  const { position } = await store.append(
    threadStream(id),
    [{ type: "ThreadCreated", data: { thread_id: id, metadata: {}, created_at: "2026-01-01T00:00:00+00:00" } }],
    "no_stream",
  );
  const event = await delivered;
  t.equal(event.position, position, "the appended event is delivered");
  t.same(seen, [{ delivered: false, afterSettle: true, appliedBefore: false }], "not in the tables when delivered; in them right after settle");
  t.ok(applied, "onApplied listeners are told once settle folded it");
  t.equal(models.runner.position, position, "the fold position moved with it");
  models.runner.settle(); // nothing left: a no-op
  t.equal(models.runner.position, position);
});

/** Where the read models' fold stood each time the server wrote the end of a /wait, /join or /runs/stream answer. */
function foldPositionAtAnswers(srv: TestServer): bigint[] {
  const positions: bigint[] = [];
  srv.server.http.server.prependListener("request", (req: IncomingMessage, res: ServerResponse) => {
    if (!/\/runs\/wait$|\/join$|\/runs\/stream$/.test((req.url ?? "").split("?")[0])) return;
    const end = res.end.bind(res) as (...args: unknown[]) => ServerResponse;
    res.end = ((...args: unknown[]) => {
      positions.push(srv.server.readModels.runner.position);
      return end(...args);
    }) as typeof res.end;
  });
  return positions;
}

/** The log position of each run's RunFinished mark on its thread, as delivered. */
function finishMarks(srv: TestServer): Map<string, bigint> {
  const marks = new Map<string, bigint>();
  srv.server.readModels.runner.onDelivered((event) => {
    if (event.type === "RunFinished") marks.set((event.data as { run_id: string }).run_id, event.position);
  });
  return marks;
}

/** A server that records where the fold stood at each answer and each run's RunFinished mark, and a thread on it. */
async function recordingServer(t: Test) {
  const srv = await startTestServer();
  t.teardown(() => srv.close());
  const answeredAt = foldPositionAtAnswers(srv);
  const marks = finishMarks(srv);
  const thread = await srv.client.threads.create();
  return { srv, answeredAt, marks, thread, gate: gates(t) };
}

/**
 * The thread's only run, as the next request sees it: done, its thread idle; and the server's one
 * answer so far (`what` names it) was written before the fold reached the run's mark.
 */
async function answeredBeforeFold(
  t: Test,
  o: { srv: TestServer; answeredAt: bigint[]; marks: Map<string, bigint>; threadId: string },
  what: string,
): Promise<void> {
  const [run] = await o.srv.client.runs.list(o.threadId);
  t.equal(run.status, "success", "the next request sees the run done");
  t.equal((await o.srv.client.threads.get(o.threadId)).status, "idle", "and its thread idle");
  const mark = o.marks.get(run.run_id);
  t.ok(mark !== undefined, "the thread's RunFinished mark was delivered");
  t.equal(o.answeredAt.length, 1);
  t.ok(o.answeredAt[0] < mark!, `${what} before the fold reached the mark (fold at ${o.answeredAt[0]}, mark at ${mark})`);
}

t.test("/wait and /join answer once the run's end is durable, before the fold; the next request sees the run done", async (t) => {
  const { srv, answeredAt, marks, thread, gate } = await recordingServer(t);

  // Held in its node by a gate. The answer's headers come first (the run is not done), so once they are
  // here the server waits for the run's end; then the gate opens.
  const waiting = await fetchJson(`${srv.url}/threads/${thread.thread_id}/runs/wait`, "POST", { assistant_id: "delay", input: { gate: gate.path("wait") } });
  t.equal(waiting.status, 200);
  gate.open("wait");
  t.match(await waiting.json(), { gate: gate.path("wait") }, "the run's result");
  // A new request: the read models show what the answer said.
  await answeredBeforeFold(t, { srv, answeredAt, marks, threadId: thread.thread_id }, "answered");

  // A join of a background run, the same way.
  const held = await srv.client.runs.create(thread.thread_id, "delay", { input: { gate: gate.path("join") } });
  const joining = await fetch(`${srv.url}/threads/${thread.thread_id}/runs/${held.run_id}/join`);
  t.equal(joining.status, 200);
  gate.open("join");
  t.match(await joining.json(), { gate: gate.path("join") });
  t.equal((await srv.client.runs.get(thread.thread_id, held.run_id)).status, "success", "the next request sees it done");
  const heldMark = marks.get(held.run_id);
  t.ok(heldMark !== undefined);
  t.equal(answeredAt.length, 2);
  t.ok(answeredAt[1] < heldMark!, "the join, too, was answered before the fold reached the mark");

  // A run that is over by the time its join comes is answered at once, from the log, as before.
  t.match(await srv.client.runs.join(thread.thread_id, held.run_id), { gate: gate.path("join") });
  t.equal(answeredAt.length, 3);
});

t.test("a run's SSE stream ends once the run's end is durable, before the fold; the next request sees the run done", async (t) => {
  const { srv, answeredAt: endedAt, marks, thread, gate } = await recordingServer(t);
  const streaming = await fetchJson(`${srv.url}/threads/${thread.thread_id}/runs/stream`, "POST", {
    assistant_id: "delay",
    input: { gate: gate.path("stream") },
    stream_mode: ["values"],
  });
  t.equal(streaming.status, 200);
  gate.open("stream");
  const text = await streaming.text();
  t.match(text, /event: values/, "the run's values were streamed");
  await answeredBeforeFold(t, { srv, answeredAt: endedAt, marks, threadId: thread.thread_id }, "the stream ended");
});

t.test("a stateless run's /wait answers only once its temporary thread is deleted and folded", async (t) => {
  const srv = await startTestServer();
  t.teardown(() => srv.close());
  const answeredAt = foldPositionAtAnswers(srv);
  const marks = finishMarks(srv);
  const deletions = new Map<string, bigint>();
  srv.server.readModels.runner.onDelivered((event) => {
    if (event.type === "ThreadDeleted") deletions.set(event.streamId.slice("thread-".length), event.position);
  });

  const result = (await srv.client.runs.wait(null, "agent", { input: { messages: [{ role: "user", content: "hi" }] } })) as { messages: unknown[] };
  t.equal(result.messages.length, 2, "the run's result");
  t.equal(marks.size, 1);
  t.equal(deletions.size, 1, "its temporary thread was deleted");
  const [threadId, deleted] = [...deletions][0];
  t.equal(answeredAt.length, 1);
  t.ok(answeredAt[0] >= deleted, "answered after the fold reached the thread's deletion");
  await t.rejects(srv.client.threads.get(threadId), /404/, "the thread is gone");
});
