import t from "tap";
import { startTestServer, type TestServer } from "../support/server.js";
import { gates } from "../support/gates.js";
import { runStream } from "../../src/domain/runs.js";

/**
 * A stream of a run its request created gets its `metadata` event at once, before any worker claims the
 * run (RunLifecycle.createdOutputs): it does not wait behind the outputs other runs are writing. Then the
 * stream goes on exactly as a stream joined later from the start shows it: no second `metadata`, same
 * ids, same order, same bytes. A join that resumes (Last-Event-ID) is as before.
 */

const human = (content: string) => ({ role: "user", content });

/** An SSE response read event by event, as raw blocks (`event: …\r\ndata: …\r\nid: …`), heartbeats left out. */
function sseBlocks(body: ReadableStream<Uint8Array>): { next(): Promise<string | undefined>; rest(): Promise<string[]> } {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  const next = async (): Promise<string | undefined> => {
    for (;;) {
      const end = buffer.indexOf("\r\n\r\n");
      if (end >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 4);
        if (block.startsWith(":")) continue;
        return block;
      }
      const { value, done } = await reader.read();
      if (done) return undefined;
      buffer += decoder.decode(value, { stream: true });
    }
  };
  const rest = async () => {
    const out: string[] = [];
    for (let b = await next(); b !== undefined; b = await next()) out.push(b);
    return out;
  };
  return { next, rest };
}

const eventOf = (block: string) => /^event: (.*)$/m.exec(block)?.[1];

async function joinedBlocks(srv: TestServer, path: string, lastEventId?: string): Promise<string[]> {
  const res = await fetch(`${srv.url}${path}`, { headers: lastEventId === undefined ? {} : { "last-event-id": lastEventId } });
  if (!res.body) throw new Error("no body");
  return sseBlocks(res.body).rest();
}

/** Resolves once the run has been claimed (a join shows its `metadata` event, which joins still read from the log). */
async function claimed(srv: TestServer, threadId: string, runId: string): Promise<void> {
  for await (const part of srv.client.runs.joinStream(threadId, runId, { lastEventId: "-1" })) {
    if (part.event === "metadata") return;
  }
}

t.test("the first event of a created run's stream", async (t) => {
  // One worker slot: a run held at a gate keeps every other run created but not claimed.
  const srv = await startTestServer({ env: { N_JOBS_PER_WORKER: "1" } });
  t.teardown(() => srv.close());
  const { client } = srv;

  for (const stateless of [false, true]) {
    t.test(`${stateless ? "stateless" : "thread"} run: metadata before the claim, then the stream a later join sees`, async (t) => {
      const gate = gates(t);
      const other = await client.threads.create();
      const busy = await client.runs.create(other.thread_id, "delay", { input: { gate: gate.path("busy"), messages: [human("first")] } });
      await claimed(srv, other.thread_id, busy.run_id);

      const thread = stateless ? undefined : await client.threads.create();
      const body = { assistant_id: "agent", input: { messages: [human("hi")] }, stream_mode: ["messages-tuple", "values"] };
      const url = thread ? `${srv.url}/threads/${thread.thread_id}/runs/stream` : `${srv.url}/runs/stream`;
      const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
      t.equal(res.status, 200);
      if (!res.body) throw new Error("no body");
      const runId = (res.headers.get("content-location") ?? "").split("/").pop() ?? "";
      t.match(runId, /^[0-9a-f-]{36}$/, "the created run is named in Content-Location");
      const stream = sseBlocks(res.body);

      const first = await stream.next();
      t.equal(first, `event: metadata\r\ndata: ${JSON.stringify({ run_id: runId, attempt: 1 })}\r\nid: 0`, "the metadata event, id 0, as the claim writes it");
      // The only slot is still taken: nothing of the run is in the log, not even its claim.
      t.same(await srv.server.store.readStream(runStream(runId)), [], "the run is not claimed yet");
      // Joined now (a stateless run's stream cannot be joined once it ended: its thread is gone), read once it ended.
      const joinPath = thread ? `/threads/${thread.thread_id}/runs/${runId}/stream` : `/runs/${runId}/stream`;
      const joined = joinedBlocks(srv, joinPath);
      const resumed = joinedBlocks(srv, joinPath, "0");
      gate.open("busy");

      const streamed = [first!, ...(await stream.rest())];
      const events = streamed.map(eventOf);
      t.equal(events.filter((e) => e === "metadata").length, 1, "one metadata event");
      t.ok(events.includes("messages") && events.includes("values"), `the run's outputs follow: ${events.join(",")}`);

      t.same(await joined, streamed, "byte for byte the stream a join from the start sees");
      t.same(await resumed, streamed.slice(1), "a resumed join starts after the metadata, as before");
      if (thread) t.same(await joinedBlocks(srv, joinPath), streamed, "and a join from the start once the run ended");

      const log = await srv.server.store.readStream(runStream(runId));
      const metadata = log.filter((e) => e.type === "RunOutput" && (e.data as { event: string }).event === "metadata");
      t.same(
        metadata.map((e) => e.revision),
        [1n],
        "the claim wrote the metadata once, at revision 1 (id 0)",
      );
    });
  }
});
