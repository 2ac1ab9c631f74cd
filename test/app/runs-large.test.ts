import t from "tap";
import { startTestServer } from "../support/server.js";
import { runStream } from "../../src/domain/runs.js";

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
  t.ok(
    events.every((e) => JSON.stringify(e.data).length < 1_048_576),
    "no event of the run is over the limit",
  );

  // The streamed `values` chunk was too large for one event as well: the stream resolves it.
  const streamed = [];
  for await (const part of srv.client.runs.joinStream(thread.thread_id, runs[0].run_id, { lastEventId: "-1" })) streamed.push(part);
  const values = streamed.filter((p) => p.event === "values").pop()?.data as { messages: { content: string }[] };
  t.equal(values.messages[1].content.length, big.length + "You said: ".length, "the streamed state is whole");

  // So does the thread stream, from the thread's beginning to the run's end.
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), 60_000);
  const threadParts: { event: string; data: unknown }[] = [];
  for await (const part of srv.client.threads.joinStream(thread.thread_id, { lastEventId: "-", signal: controller.signal })) {
    threadParts.push(part as { event: string; data: unknown });
    if (part.event === "metadata" && (part.data as { status?: string }).status === "run_done") break;
  }
  clearTimeout(timer);
  controller.abort();
  const threadValues = threadParts.filter((p) => p.event === "values").pop()?.data as { messages: { content: string }[] } | undefined;
  t.equal(threadValues?.messages[1]?.content.length, big.length + "You said: ".length, "the thread stream's state is whole");

  const copy = await srv.client.threads.copy(thread.thread_id);
  const copied = await srv.client.threads.get<{ messages: unknown[] }>(copy.thread_id);
  t.equal(copied.values.messages.length, 2, "a copy keeps the large values");

  // A second turn on the same thread still works (the state is read back from the checkpoints).
  const again = (await srv.client.runs.wait(thread.thread_id, "agent", { input: { messages: [{ role: "user", content: "short" }] } })) as {
    messages: unknown[];
  };
  t.equal(again.messages.length, 4);
});

t.test("a large result that is the run's last values output is referenced, not written again", async (t) => {
  const srv = await startTestServer();
  t.teardown(() => srv.close());
  const store = srv.server.store;
  const big = "large ".repeat(50_000); // 300 KB: over the limit of a value kept inside an event, under an append's
  const thread = await srv.client.threads.create();
  const result = (await srv.client.runs.wait(thread.thread_id, "agent", { input: { messages: [{ role: "user", content: big }] } })) as {
    messages: { content: string }[];
  };
  t.equal(result.messages[0].content, big, "/wait answers with the values");
  const [run] = await srv.client.runs.list(thread.thread_id);
  const events = await store.readStream(runStream(run.run_id));
  const ended = events.find((e) => e.type === "RunEnded")!.data as { values: { __large_json__: { stream: string; revision: string; output: string } } };
  const ref = ended.values.__large_json__;
  t.same(Object.keys(ref).sort(), ["output", "revision", "stream"], "the end refers to an output");
  t.equal(ref.stream, runStream(run.run_id));
  const output = events.find((e) => e.revision === BigInt(ref.revision))!;
  t.equal(output.type, "RunOutput");
  t.same((output.data as { event: string; data: unknown }).data, result, "the output it names holds the values");
  t.same(await store.readStream(`run-values-${run.run_id}`), [], "nothing written beside the run");
  t.ok(JSON.stringify(ended).length < 1000, "the end is small");

  const joined = (await srv.client.runs.join(thread.thread_id, run.run_id)) as { messages: { content: string }[] };
  t.equal(joined.messages[0].content, big, "/join resolves it");
  const got = await srv.client.threads.get<{ messages: { content: string }[] }>(thread.thread_id);
  t.equal(got.values.messages[0].content, big, "the thread's values resolve it");

  // Interrupted before its node, the run's state is read back, not an output: written beside the run.
  // Its /wait answers `{"__interrupt__": []}`, the last values chunk, as the official servers do.
  const paused = await srv.client.runs.wait(thread.thread_id, "agent", {
    input: { messages: [{ role: "user", content: "pause" }] },
    interruptBefore: ["agent"],
  });
  t.same(paused, { __interrupt__: [] });
  const [second] = (await srv.client.runs.list(thread.thread_id)).filter((r) => r.run_id !== run.run_id);
  t.ok((await store.readStream(`run-values-${second.run_id}`)).length > 0, "the interrupted run's values were written beside it");
  t.equal((await srv.client.threads.get<{ messages: unknown[] }>(thread.thread_id)).values.messages.length, 3);
});

t.test("a reference to an output that is not there is an error, not a wrong value", async (t) => {
  const srv = await startTestServer();
  t.teardown(() => srv.close());
  const { resolveLarge, outputReference, LargeValueMissingError } = await import("../../src/eventstore/large-values.js");
  const store = srv.server.store;
  await store.append("run-probe", [
    { type: "RunOutput", data: { event: "updates", data: { a: 1 } } },
    { type: "RunOutput", data: { event: "values", data: { b: 2 } } },
  ]);
  t.same(await resolveLarge(store, outputReference("run-probe", 1n, "values")), { b: 2 });
  await t.rejects(resolveLarge(store, outputReference("run-probe", 0n, "values")), LargeValueMissingError, "another output");
  await t.rejects(resolveLarge(store, outputReference("run-probe", 7n, "values")), LargeValueMissingError, "past the end");
  await t.rejects(resolveLarge(store, outputReference("run-missing", 0n, "values")), LargeValueMissingError, "no such stream");
  t.same(
    await resolveLarge(store, { __large_json__: { stream: "x", revision: "one", output: "values" } }),
    { __large_json__: { stream: "x", revision: "one", output: "values" } },
    "a malformed reference is just a value",
  );
});
