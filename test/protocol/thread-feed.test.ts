import t from "tap";
import { feedThread, replayedEventCount } from "../../src/protocol/thread-feed.js";
import { EVENTS_PER_LOG_EVENT, seqOf, type ProtocolEvent } from "../../src/protocol/log-events.js";
import { startTestServer } from "../support/server.js";

/**
 * What a new subscription is told it replays (`replayed_events`) is what the feed started after the
 * count replays, even when the thread's next run is enqueued in between: the feed starts at the run
 * the count started at, not at the live start as it has become.
 */
t.test("the replay count and the feed start at the same run", async (t) => {
  const srv = await startTestServer();
  t.teardown(() => srv.close());
  const { store } = srv.server;
  const thread = await srv.client.threads.create();
  const input = { messages: [{ role: "user", content: "hi" }] };
  const first = await srv.client.runs.create(thread.thread_id, "agent", { input });
  await srv.client.runs.join(thread.thread_id, first.run_id);

  const filter = { channels: ["lifecycle", "values"] } as Parameters<typeof replayedEventCount>[2];
  const head = seqOf(await store.headPosition(), EVENTS_PER_LOG_EVENT - 1);
  const replay = await replayedEventCount(store, thread.thread_id, filter, head);
  t.equal(replay.fromRun, first.run_id, "counted from the thread's latest run");
  t.ok(replay.count > 0, `the run's events are counted (${replay.count})`);

  // The next run is enqueued (and ends) before the feed starts: without `fromRun` the feed would start there.
  const second = await srv.client.runs.create(thread.thread_id, "agent", { input });
  await srv.client.runs.join(thread.thread_id, second.run_id);

  const read = async (fromRun: string | undefined) => {
    const controller = new AbortController();
    const events: ProtocolEvent[] = [];
    await feedThread(
      store,
      thread.thread_id,
      undefined,
      controller.signal,
      (event) => {
        events.push(event);
        const completed = (e: ProtocolEvent) => e.method === "lifecycle" && (e.params.data as { event?: string }).event === "completed";
        if (event.params.namespace.length === 0 && completed(event) && events.filter(completed).length === (fromRun ? 2 : 1)) controller.abort();
      },
      fromRun,
    );
    return events;
  };
  const fromCount = await read(replay.fromRun);
  const replayed = fromCount.filter((e) => e.seq <= head && ["lifecycle", "values"].includes(e.method));
  t.equal(replayed.length, replay.count, "the feed from the counted run replays exactly the counted events");
  const live = await read(undefined);
  t.ok(
    live.every((e) => e.seq > head),
    "without it the feed starts at the newer run, none of whose events were counted (the over-count this prevents)",
  );
});
