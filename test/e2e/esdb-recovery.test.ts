import t from "tap";
import { human, json, outage, post, startRig, within, roundTrip } from "../support/esdb-outage.js";
import { gates as makeGates } from "../support/gates.js";

/**
 * Connection loss between a server process and EventStoreDB (the test double), through a TCP proxy
 * that resets every connection and refuses new ones for a while. The server must say it is not
 * healthy while cut, answer 503 + Retry-After (never 500, never hang) to what needs the log, and
 * serve again within seconds of the heal, with nothing missed or repeated. (The 30 s outage is
 * test/e2e/esdb-recovery-long.test.ts.)
 */

t.test("a 3 s cut: /ok says so, requests get 503 + Retry-After, and the server serves again within 5 s of the heal", async (t) => {
  await outage(t, 3_000);
});

interface SseEvent {
  id: string;
  event: string;
  data: string;
}

/** Reads an SSE response to its end (the server ends it after the run ended), calling `onEvent` for each event. */
async function readSse(res: Response, onEvent: (e: SseEvent) => void): Promise<SseEvent[]> {
  const events: SseEvent[] = [];
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(chunk, { stream: true }).replace(/\r\n?/g, "\n");
    let end: number;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const e: SseEvent = { id: "", event: "message", data: "" };
      let fields = 0;
      for (const line of block.split("\n")) {
        const colon = line.indexOf(":");
        if (colon <= 0) continue; // comments (heartbeats)
        const [name, value] = [line.slice(0, colon), line.slice(colon + 1).replace(/^ /, "")];
        if (name === "id" || name === "event" || name === "data") {
          e[name] = value;
          fields++;
        }
      }
      if (fields === 0) continue;
      events.push(e);
      onEvent(e);
    }
  }
  return events;
}

t.test("an SSE stream open across a 3 s cut resumes without losing or repeating an event", async (t) => {
  const rig = await startRig(t);
  await roundTrip(rig.url, "before");
  const thread = await json<{ thread_id: string }>(post(`${rig.url}/threads`, {}));
  // The node waits at its gate until after the heal: the cut falls between the events before it and those after it.
  const gates = makeGates(t);
  const run = await json<{ run_id: string }>(
    post(`${rig.url}/threads/${thread.thread_id}/runs`, {
      assistant_id: "delay",
      input: { messages: [human("s")], gate: gates.path("s") },
      stream_mode: ["values", "updates", "debug"],
    }),
  );
  const res = await fetch(`${rig.url}/threads/${thread.thread_id}/runs/${run.run_id}/stream`, { headers: { accept: "text/event-stream" } });
  t.equal(res.status, 200);
  let first!: () => void;
  const gotFirst = new Promise<void>((resolve) => (first = resolve));
  const reading = readSse(res, () => first());
  await gotFirst;
  rig.proxy.cut();
  await within(5_000, "/ok non-200 while cut", async () => (await fetch(`${rig.url}/ok`)).status !== 200);
  await new Promise((resolve) => setTimeout(resolve, 3_000));
  rig.proxy.heal();
  gates.open("s");
  const seen = await reading;

  const replay = await readSse(
    await fetch(`${rig.url}/threads/${thread.thread_id}/runs/${run.run_id}/stream`, { headers: { accept: "text/event-stream", "last-event-id": "-1" } }),
    () => undefined,
  );
  const ids = seen.map((e) => e.id).filter((id) => id !== "");
  t.same(ids, [...new Set(ids)], "no event twice");
  t.same(
    seen.filter((e) => e.id !== ""),
    replay.filter((e) => e.id !== ""),
    "every event of the run, in order (as a replay from the log shows them)",
  );
  t.ok(
    seen.some((e) => e.event === "updates"),
    "events after the cut arrived",
  );
  const status = await json<{ status: string }>(fetch(`${rig.url}/threads/${thread.thread_id}/runs/${run.run_id}`));
  t.equal(status.status, "success", "the run ended well");
});
