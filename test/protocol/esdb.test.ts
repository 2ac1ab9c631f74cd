import t from "tap";
import { startEsdbTestDouble } from "../support/esdb-test-double.js";
import { startTestServer, type TestServer } from "../support/server.js";
import {
  TRANSPORTS,
  assembledMessages,
  record,
  resumeSince,
  rootLifecycle,
  seqsIncrease,
  threadStream,
  type ProtocolEvent,
  type Transport,
} from "../support/protocol-stream.js";

/**
 * The thread streaming protocol (v2) through the official SDK (`client.threads.stream(...)`,
 * `ThreadStream`), over SSE and over a WebSocket, on EventStoreDB (the test double: the real client
 * and wire protocol over an in-memory log): the protocol's events are read from EventStoreDB's
 * streams, their seqs from its positions. A run streams its values and messages and ends with
 * lifecycle completed; an interrupt is answered with input.respond; a resume with `since` sees the
 * events it saw live with the same seqs, on the same server and on a second server on the same
 * EventStoreDB (the seqs are the log's, not a process's), which also follows a run the first starts.
 */

const texts = (e: ProtocolEvent) => e.params.data.messages.map((m) => m.content);
const kinds = (events: ProtocolEvent[]) => events.map((e) => (e.method === "lifecycle" ? e.params.data.event : e.method));
const roots = (events: ProtocolEvent[]) => events.filter((e) => e.method === "lifecycle" && e.params.namespace.length === 0).map((e) => e.params.data.event);
const onChannels = (events: ProtocolEvent[], methods: string[]) => events.filter((e) => methods.includes(e.method));

t.test("ThreadStream on EventStoreDB", async (t) => {
  const double = await startEsdbTestDouble();
  let srv: TestServer | undefined;
  let other: TestServer | undefined;
  t.teardown(async () => {
    await other?.close();
    await srv?.close();
    await double.close();
  });
  srv = await startTestServer({ env: { EVENTSTORE_URL: double.connectionString } });
  const server = srv;
  const stream = (assistantId: string, transport: Transport, threadId?: string) =>
    threadStream(server.client, server.url, assistantId, transport, { threadId });

  /** What each transport saw of its interrupt thread, live: the thread, and every event of both its runs. */
  const interrupted: Partial<Record<Transport, { threadId: string; events: ProtocolEvent[] }>> = {};

  for (const transport of TRANSPORTS) {
    t.test(`${transport}: a run streams its values and messages, ending with lifecycle completed`, async (t) => {
      const thread = stream("agent", transport);
      t.teardown(() => thread.close());
      const { events, wait } = record(thread);
      const messages = assembledMessages(thread, (text) => text === "You said: hi");
      const started = await thread.run.start({ input: { messages: [{ type: "human", content: "hi" }] } });
      t.match(started, { run_id: String });
      const values = (await thread.values) as { messages: { content: string }[] } | undefined;
      t.same(
        values?.messages.map((m) => m.content),
        ["hi", "You said: hi"],
        "await thread.values: the run's final values",
      );
      await wait((e) => rootLifecycle(e, "completed"));
      t.equal(await messages.found, "You said: hi", "the AI message assembled from the messages channel");
      t.ok(
        events.some((e) => e.method === "messages"),
        "messages events were delivered",
      );
      t.same(roots(events), ["running", "completed"], "the root lifecycle: running, then completed, once each");
      t.equal(events.at(-1)!.method, "lifecycle", "lifecycle completed is the last event");
      const seqs = events.map((e) => e.seq);
      t.ok(
        seqs.every((s) => Number.isSafeInteger(s) && s > 0),
        `positive safe-integer seqs from EventStoreDB positions ${seqs}`,
      );
      t.ok(seqsIncrease(events), `increasing seqs ${seqs}`);
      t.ok(
        events.every((e) => e.event_id === String(e.seq)),
        "event_id is the seq",
      );
      t.match(await thread.agent.getTree(), { tree: { namespace: [], status: "completed", graph_name: "agent" } });
      // The same thread over REST: its state is EventStoreDB's too.
      const state = await server.client.threads.getState(thread.threadId);
      t.same(
        (state.values as { messages: { content: string }[] }).messages.map((m) => m.content),
        ["hi", "You said: hi"],
      );
    });

    t.test(`${transport}: an interrupt is announced (input.requested) and answered with input.respond`, async (t) => {
      const thread = stream("interrupt", transport);
      t.teardown(() => thread.close());
      const { events, wait } = record(thread);
      void thread.values;
      await thread.run.start({ input: { messages: [{ type: "human", content: "go" }] } });
      await wait((e) => rootLifecycle(e, "interrupted"));
      const requested = events.find((e) => e.method === "input.requested")!;
      t.match(requested.params.data, { interrupt_id: String, payload: { question: "Continue?" } });
      t.equal(thread.interrupted, true);
      t.equal(thread.interrupts.length, 1);
      await thread.input.respond({ namespace: [], interrupt_id: requested.params.data.interrupt_id, response: "yes" } as never);
      await wait((e) => rootLifecycle(e, "completed"));
      t.same(texts(events.filter((e) => e.method === "values").at(-1)!), ["go", "You answered: yes"], "the resumed run's values");
      t.same(roots(events), ["running", "interrupted", "running", "completed"], "the interrupted run, then the one that answered it, on one stream");
      const state = (await thread.state.get({ namespace: [] } as never)) as { values: { messages: { content: string }[] }; checkpoint?: { id: string } };
      t.same(
        state.values.messages.map((m) => m.content),
        ["go", "You answered: yes"],
      );
      t.match(state.checkpoint, { id: String });
      interrupted[transport] = { threadId: thread.threadId, events: [...events] };
    });

    t.test(`${transport}: a resume with since sees the events it saw live, with the same seqs`, async (t) => {
      const before = interrupted[transport];
      if (!before) return t.fail("the interrupt test ran first");
      const firstEnd = before.events.find((e) => rootLifecycle([e], "interrupted"))!;

      // Since the first run's end: the run that answered it, to its end.
      const afterFirst = await resumeSince(
        server.client,
        server.url,
        transport,
        before.threadId,
        { channels: ["lifecycle", "values"], since: firstEnd.seq },
        (seen) => rootLifecycle(seen, "completed"),
      );
      t.same(kinds(afterFirst), ["running", "values", "values", "completed"], "the second run only");
      t.same(
        afterFirst.map((e) => e.seq),
        onChannels(before.events, ["lifecycle", "values"])
          .filter((e) => e.seq > firstEnd.seq)
          .map((e) => e.seq),
        "the same seqs as live",
      );
      t.same(texts(afterFirst[2]!), ["go", "You answered: yes"]);

      // Since the first event: the rest of the first run (its interrupt announced again), then the second.
      const first = before.events[0]!;
      const all = await resumeSince(server.client, server.url, transport, before.threadId, { channels: ["lifecycle", "input"], since: first.seq }, (seen) =>
        rootLifecycle(seen, "completed"),
      );
      t.same(kinds(all), ["input.requested", "interrupted", "running", "completed"], "both runs, from after the first event");
      t.same(
        all.map((e) => e.seq),
        onChannels(before.events, ["lifecycle", "input.requested"])
          .filter((e) => e.seq > first.seq)
          .map((e) => e.seq),
        "the same seqs as live",
      );
      t.match(all[0]!.params.data, { interrupt_id: before.events.find((e) => e.method === "input.requested")!.params.data.interrupt_id });
    });
  }

  t.test("a second server on the same EventStoreDB: since gives the same events with the same seqs; it follows a run the first starts", async (t) => {
    const before = interrupted.websocket;
    if (!before) return t.fail("the interrupt tests ran first");
    other = await startTestServer({ env: { EVENTSTORE_URL: double.connectionString } });
    const second = other;
    const since = before.events[0]!.seq;
    for (const transport of TRANSPORTS) {
      const got = await resumeSince(second.client, second.url, transport, before.threadId, { channels: ["lifecycle", "input", "values"], since }, (seen) =>
        rootLifecycle(seen, "completed"),
      );
      t.same(
        got.map((e) => e.seq),
        onChannels(before.events, ["lifecycle", "values", "input.requested"])
          .filter((e) => e.seq > since)
          .map((e) => e.seq),
        `${transport}: the events after the first, with the seqs the first server gave them`,
      );
      t.same(kinds(got), ["values", "input.requested", "interrupted", "running", "values", "values", "completed"], transport);
    }

    // A run started on the first server, followed on the second after the last seq seen (EventStoreDB's subscriptions carry it live).
    let lastSeen = before.events.at(-1)!.seq;
    for (const transport of TRANSPORTS) {
      const following = resumeSince(second.client, second.url, transport, before.threadId, { channels: ["lifecycle", "values"], since: lastSeen }, (seen) =>
        rootLifecycle(seen, "completed"),
      );
      const starter = stream("agent", "sse", before.threadId);
      t.teardown(() => starter.close());
      const started = (await starter.run.start({ input: { messages: [{ type: "human", content: transport }] } })) as { run_id: string };
      const events = await following;
      t.same(kinds(events), ["running", "values", "values", "completed"], `${transport}: the new run only`);
      t.ok(
        events.every((e) => e.seq > lastSeen),
        "after the since",
      );
      t.same(texts(events[2]!).slice(-2), [transport, `You said: ${transport}`], "the new run's values, on the other server");
      await second.client.runs.join(before.threadId, started.run_id);
      t.equal((await second.client.runs.get(before.threadId, started.run_id)).status, "success", "the run, as the second server reads it");
      lastSeen = events.at(-1)!.seq;
    }
  });
});
