import t from "tap";
import { startTestServer } from "./support/server.js";
import { runStream } from "../src/domain/runs.js";

/**
 * Appends are at most 1 MiB on both stores (EventStoreDB's default). A run whose input and final
 * state are larger still works end to end: the values are written beside the run and referenced.
 */
t.test("a run with an input and a state over 1 MiB", async (t) => {
  const srv = await startTestServer();
  t.teardown(() => srv.close());
  const big = "x".repeat(1_500_000);
  const thread = await srv.client.threads.create();
  const result = (await srv.client.runs.wait(thread.thread_id, "agent", { input: { messages: [{ role: "user", content: big }] } })) as {
    messages: { content: string }[];
  };
  t.equal(result.messages.length, 2);
  t.equal(result.messages[0].content.length, big.length, "the input arrived whole");
  t.equal(result.messages[1].content, `You said: ${big}`, "the reply (over 1 MiB) came back whole");

  const got = await srv.client.threads.get<{ messages: { content: string }[] }>(thread.thread_id);
  t.equal(got.values.messages[1].content.length, big.length + "You said: ".length, "the thread's values are resolved");
  const state = await srv.client.threads.getState<{ messages: unknown[] }>(thread.thread_id);
  t.equal(state.values.messages.length, 2);
  const [found] = await srv.client.threads.search({ metadata: { graph_id: "agent" }, limit: 1 });
  t.equal((found.values as { messages: unknown[] }).messages.length, 2, "search results resolve them too");

  const runs = await srv.client.runs.list(thread.thread_id);
  const events = await srv.server.store.readStream(runStream(runs[0].run_id));
  t.ok(events.every((e) => JSON.stringify(e.data).length < 1_048_576), "no event of the run is over the limit");

  // The streamed `values` chunk was too large for one event as well: the stream resolves it.
  const streamed = [];
  for await (const part of srv.client.runs.joinStream(thread.thread_id, runs[0].run_id, { lastEventId: "-1" })) streamed.push(part);
  const values = streamed.filter((p) => p.event === "values").pop()?.data as { messages: { content: string }[] };
  t.equal(values.messages[1].content.length, big.length + "You said: ".length, "the streamed state is whole");

  const copy = await srv.client.threads.copy(thread.thread_id);
  const copied = await srv.client.threads.get<{ messages: unknown[] }>(copy.thread_id);
  t.equal(copied.values.messages.length, 2, "a copy keeps the large values");

  // A second turn on the same thread still works (the state is read back from the checkpoints).
  const again = (await srv.client.runs.wait(thread.thread_id, "agent", { input: { messages: [{ role: "user", content: "short" }] } })) as { messages: unknown[] };
  t.equal(again.messages.length, 4);
});
