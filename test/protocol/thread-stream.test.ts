import t from "tap";
import { WebSocket } from "ws";
import { startTestServer, type TestServer } from "../support/server.js";
import { gates as makeGates } from "../support/gates.js";
import { record, rootLifecycle, seqsIncrease, TRANSPORTS, type ProtocolEvent, type Transport } from "../support/protocol-stream.js";

/**
 * The thread streaming protocol (v2) through the official SDK's `ThreadStream`
 * (`client.threads.stream(threadId)`), over both of its transports: SSE (+ POST commands) and a
 * WebSocket. Runs, messages, an interrupt answered with `input.respond`, several runs on one
 * subscription, and a resume with `since` after the server restarted (the events are in the log).
 */

type Event = ProtocolEvent;

function threadStream(srv: TestServer, assistantId: string, transport: Transport, threadId?: string) {
  const options = {
    assistantId,
    transport,
    // Node 20 has no global WebSocket: the `ws` package's (a browser-compatible API).
    ...(transport === "websocket" ? { webSocketFactory: (url: string) => new WebSocket(url) as never } : {}),
  };
  return threadId ? srv.client.threads.stream(threadId, options as never) : srv.client.threads.stream(options as never);
}

t.test("a run's start is announced when the run is accepted, before a worker takes it", async (t) => {
  // One run at a time: a gated run on another thread holds the worker, so the streamed run stays queued.
  const srv = await startTestServer({ env: { N_JOBS_PER_WORKER: "1" } });
  t.teardown(() => srv.close());
  for (const transport of TRANSPORTS) {
    const gates = makeGates(t);
    const { thread_id: busyThread } = await srv.client.threads.create();
    const busy = await srv.client.runs.create(busyThread, "delay", { input: { gate: gates.path("busy") } });
    const thread = threadStream(srv, "delay", transport);
    t.teardown(() => thread.close());
    const { events, wait } = record(thread);
    const { run_id: runId } = (await thread.run.start({ input: { delay: 0 } })) as { run_id: string };
    await wait((e) => rootLifecycle(e, "running"));
    t.equal((await srv.client.runs.get(thread.threadId, runId)).status, "pending", `${transport}: running is sent while the run waits for the worker`);
    gates.open("busy");
    await wait((e) => rootLifecycle(e, "completed"));
    const roots = events.filter((e) => e.method === "lifecycle" && e.params.namespace.length === 0).map((e) => e.params.data.event);
    t.same(roots, ["running", "completed"], `${transport}: running once, not again at the claim`);
    t.ok(seqsIncrease(events), `${transport}: increasing seqs`);
    await srv.client.runs.join(busyThread, busy.run_id);
  }
});

t.test("ThreadStream over the thread streaming protocol", async (t) => {
  let srv = await startTestServer();
  t.teardown(() => srv.close());

  for (const transport of TRANSPORTS) {
    t.test(`${transport}: a run streams its values and messages, ending with lifecycle completed`, async (t) => {
      const thread = threadStream(srv, "agent", transport);
      t.teardown(() => thread.close());
      const { events, wait } = record(thread);
      const messages: unknown[] = [];
      const collecting = (async () => {
        for await (const message of thread.messages as AsyncIterable<{ text: PromiseLike<string> }>) messages.push(await message.text);
      })();
      const started = await thread.run.start({ input: { messages: [{ type: "human", content: "hi" }] } });
      t.match(started, { run_id: String });
      const values = (await thread.values) as { messages: { content: string }[] };
      t.same(
        values.messages.map((m) => m.content),
        ["hi", "You said: hi"],
      );
      await wait((e) => rootLifecycle(e, "completed"));
      t.ok(rootLifecycle(events, "running"), "lifecycle running first");
      const seqs = events.map((e) => e.seq);
      t.ok(seqsIncrease(events), `increasing seqs ${seqs}`);
      t.ok(
        events.every((e) => e.event_id === String(e.seq)),
        "event_id is the seq",
      );
      await Promise.race([collecting, new Promise((r) => setTimeout(r, 2000))]);
      t.ok(messages.includes("You said: hi"), `assembled the AI message from the messages channel: ${JSON.stringify(messages)}`);
      const tree = await thread.agent.getTree();
      t.match(tree, { tree: { namespace: [], status: "completed", graph_name: "agent" } });
    });

    t.test(`${transport}: an interrupt is announced (input.requested) and answered with input.respond`, async (t) => {
      const thread = threadStream(srv, "interrupt", transport);
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
      const last = events.filter((e) => e.method === "values").at(-1)!;
      t.same(
        last.params.data.messages.map((m: { content: string }) => m.content),
        ["go", "You answered: yes"],
      );
      const state = (await thread.state.get({ namespace: [] } as never)) as { values: { messages: unknown[] }; checkpoint?: { id: string } };
      t.equal(state.values.messages.length, 2);
      t.match(state.checkpoint, { id: String });
    });
  }

  t.test("subgraphs: each is started and completed, inside the run's lifecycle", async (t) => {
    const thread = threadStream(srv, "subgraph", "sse");
    t.teardown(() => thread.close());
    const subscription = (await thread.subscribe({ channels: ["lifecycle"] } as never)) as unknown as AsyncIterable<Event>;
    await thread.run.start({ input: { messages: [{ type: "human", content: "go" }] } });
    const seen: [string, string][] = [];
    for await (const e of subscription) {
      seen.push([e.params.namespace.map((segment) => segment.split(":")[0]).join("|"), e.params.data.event]);
      if (e.params.namespace.length === 0 && e.params.data.event === "completed") break;
    }
    t.same(seen, [
      ["", "running"],
      ["child", "started"],
      ["child|grandchild", "started"],
      ["child|grandchild", "completed"],
      ["child", "completed"],
      ["", "completed"],
    ]);
  });

  t.test("raw SSE: several runs on one subscription, in order; since resumes after a restart", async (t) => {
    const thread = threadStream(srv, "agent", "sse");
    const threadId = thread.threadId;
    await thread.run.start({ input: { messages: [{ type: "human", content: "one" }] } });
    await thread.values;
    await thread.close();
    // One subscription from the first run's beginning (since 0) sees both runs, then follows live.
    const controller = new AbortController();
    const response = await fetch(`${srv.url}/threads/${threadId}/stream/events`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ channels: ["lifecycle", "values"], since: 0 }),
      signal: controller.signal,
    });
    t.equal(response.status, 200);
    t.match(response.headers.get("content-type"), /text\/event-stream/);
    const seen: Event[] = [];
    const reading = (async () => {
      const decoder = new TextDecoder();
      let buffer = "";
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        let cut;
        while ((cut = buffer.indexOf("\r\n\r\n")) >= 0) {
          const frame = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 4);
          const data = frame.split("\r\n").find((l) => l.startsWith("data: "));
          if (data) seen.push(JSON.parse(data.slice(6)));
          if (seen.filter((e) => e.method === "lifecycle" && e.params.data.event === "completed").length === 2) return;
        }
      }
    })().catch(() => undefined);
    const second = threadStream(srv, "agent", "sse", threadId);
    await second.run.start({ input: { messages: [{ type: "human", content: "two" }] } });
    await second.values;
    await second.close();
    await Promise.race([reading, new Promise((r) => setTimeout(r, 10_000))]);
    controller.abort();
    const lifecycles = seen.filter((e) => e.method === "lifecycle").map((e) => e.params.data.event);
    t.same(lifecycles, ["running", "completed", "running", "completed"], "both runs, in order");
    t.ok(seqsIncrease(seen), "increasing seqs across runs");
    const firstCompleted = seen.find((e) => e.method === "lifecycle" && e.params.data.event === "completed")!;

    // After a restart, the same stream resumes after any seq: here, after the first run's end.
    srv = await srv.restart();
    const resumed = threadStream(srv, "agent", "sse", threadId);
    t.teardown(() => resumed.close());
    const replay = resumed.subscribe({ channels: ["lifecycle", "values"], since: firstCompleted.seq } as never) as unknown as Promise<AsyncIterable<Event>>;
    const got: Event[] = [];
    for await (const e of await replay) {
      got.push(e);
      if (e.method === "lifecycle" && e.params.data.event === "completed") break;
    }
    t.same(
      got.map((e) => (e.method === "lifecycle" ? e.params.data.event : e.method)),
      ["running", "values", "values", "completed"],
    );
    t.same(
      got.map((e) => e.seq),
      seen.filter((e) => e.seq > firstCompleted.seq).map((e) => e.seq),
      "the same events, the same seqs",
    );
  });

  t.test("websocket: the SDK reconnects after a restart and follows the next run; since resumes over a WebSocket too", async (t) => {
    const thread = threadStream(srv, "agent", "websocket");
    t.teardown(() => thread.close());
    const threadId = thread.threadId;
    // Everything the thread's socket delivers (onEvent), for one subscription to lifecycle and values.
    const { events: seen, wait } = record(thread);
    await thread.subscribe({ channels: ["lifecycle", "values"] } as never);
    await thread.run.start({ input: { messages: [{ type: "human", content: "one" }] } });
    await wait((e) => rootLifecycle(e, "completed"));
    const firstEnd = seen.find((e) => e.method === "lifecycle" && e.params.data.event === "completed")!;
    t.ok(firstEnd, "the first run ended");

    // The server goes away and comes back on the same address: the socket closes, the SDK reconnects and subscribes again.
    srv = await srv.restart({ samePort: true });
    const started = await thread.run.start({ input: { messages: [{ type: "human", content: "two" }] } });
    t.match(started, { run_id: String }, "a command after the restart goes through the new socket");
    await wait((e) => e.filter((x) => x.method === "lifecycle" && x.params.namespace.length === 0 && x.params.data.event === "completed").length === 2);
    const last = seen.filter((e) => e.method === "values").at(-1)!;
    t.same(
      last.params.data.messages.map((m: { content: string }) => m.content),
      ["one", "You said: one", "two", "You said: two"],
      "the second run, live",
    );
    t.ok(seqsIncrease(seen), "no event twice, in order");

    // A new socket resumes after the first event of the first run (not only from the latest run): both runs, the same seqs.
    const resumed = threadStream(srv, "agent", "websocket", threadId);
    t.teardown(() => resumed.close());
    const replay = (await resumed.subscribe({ channels: ["lifecycle", "values"], since: seen[0]!.seq } as never)) as unknown as AsyncIterable<Event>;
    const got: Event[] = [];
    for await (const e of replay) {
      got.push(e);
      if (got.filter((x) => x.method === "lifecycle" && x.params.data.event === "completed").length === 2) break;
    }
    t.same(
      got.map((e) => e.seq),
      seen.slice(1).map((e) => e.seq),
      "the same events, the same seqs",
    );
    t.same(
      got.map((e) => (e.method === "lifecycle" ? e.params.data.event : e.method)),
      ["values", "values", "completed", "running", "values", "values", "completed"],
    );
    const bad = await new Promise<unknown>((resolve) => {
      const socket = new WebSocket(`${srv.url.replace("http", "ws")}/threads/${threadId}/stream/events`);
      socket.on("open", () => socket.send(JSON.stringify({ id: 1, method: "subscription.subscribe", params: { channels: ["values"], since: -1 } })));
      socket.on("message", (data) => {
        resolve(JSON.parse(String(data)));
        socket.close();
      });
    });
    t.match(bad, { type: "error", id: 1, error: "invalid_argument", message: /since/ });
  });

  t.test("without since a stream starts at the run going on when the latest one waits behind it", async (t) => {
    const { thread_id: threadId } = await srv.client.threads.create();
    // The first run waits at its gate until the stream is subscribed.
    const gates = makeGates(t);
    const first = await srv.client.runs.create(threadId, "delay", { input: { gate: gates.path("first") }, multitaskStrategy: "enqueue" });
    const second = await srv.client.runs.create(threadId, "delay", { input: { delay: 0 }, multitaskStrategy: "enqueue" });
    t.equal((await srv.client.runs.get(threadId, second.run_id)).status, "pending", "the latest run is queued");
    const thread = threadStream(srv, "delay", "sse", threadId);
    t.teardown(() => thread.close());
    const { events, wait } = record(thread);
    await thread.subscribe({ channels: ["lifecycle"] } as never);
    gates.open("first");
    const ends = (e: Event[]) => e.filter((x) => x.params.namespace.length === 0 && ["completed", "failed"].includes(x.params.data.event));
    await wait((e) => ends(e).length === 2);
    t.same(
      events.map((e) => e.params.data.event),
      ["running", "completed", "running", "completed"],
      "the first run's end, then the queued one",
    );
    t.ok(seqsIncrease(events), "the queued run's start (at its claim) follows the first run's end");
    t.equal((await srv.client.runs.get(threadId, first.run_id)).status, "success");
  });

  t.test("bad input answers 4xx JSON", async (t) => {
    const threadId = "0190f1c2-0000-7000-8000-000000000001";
    const badFilter = await fetch(`${srv.url}/threads/${threadId}/stream/events`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ channels: ["nope"] }),
    });
    t.equal(badFilter.status, 422);
    t.match(await badFilter.json(), { detail: String });
    const badCommand = await fetch(`${srv.url}/threads/${threadId}/commands`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ method: "run.start" }),
    });
    t.equal(badCommand.status, 422);
    const noAssistant = await fetch(`${srv.url}/threads/${threadId}/commands`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ id: 1, method: "run.start", params: { assistant_id: "missing", input: {} } }),
    });
    t.equal(noAssistant.status, 200);
    t.match(await noAssistant.json(), { type: "error", id: 1, error: "invalid_argument", message: /No assistant found/ });
    const unknown = await fetch(`${srv.url}/threads/${threadId}/commands`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ id: 2, method: "nope" }),
    });
    t.match(await unknown.json(), { type: "error", id: 2, error: "unknown_command" });
    const respond = await fetch(`${srv.url}/threads/${threadId}/commands`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ id: 3, method: "input.respond", params: { interrupt_id: "x", response: 1 } }),
    });
    t.match(await respond.json(), { type: "error", id: 3, error: "no_such_run" }, "a thread no run was started on: nothing to answer");

    // A thread whose run ended without an interrupt: answering is a misuse, as the official server says.
    const thread = await srv.client.threads.create();
    await srv.client.runs.wait(thread.thread_id, "agent", { input: { messages: [{ role: "user", content: "hi" }] } });
    const notInterrupted = await fetch(`${srv.url}/threads/${thread.thread_id}/commands`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ id: 4, method: "input.respond", params: { interrupt_id: "x", response: 1 } }),
    });
    t.match(await notInterrupted.json(), {
      type: "error",
      id: 4,
      error: "invalid_argument",
      message: "input.respond can only be used while the run is interrupted.",
    });
  });

  t.test("a never-used thread: getTree and subscribe answer no_such_run and create nothing; channels are checked first", async (t) => {
    const threadId = "0190f1c2-0000-7000-8000-0000000000aa";
    const command = async (body: unknown) =>
      (
        await fetch(`${srv.url}/threads/${threadId}/commands`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) })
      ).json();
    t.same(await command({ id: 1, method: "agent.getTree" }), {
      type: "error",
      id: 1,
      error: "no_such_run",
      message: "No active run is bound to this thread.",
    });
    t.match(await command({ id: 2, method: "subscription.subscribe", params: { channels: ["values", "nope"] } }), {
      type: "error",
      id: 2,
      error: "invalid_argument",
      message: "subscription.subscribe received an unsupported channel.",
    });
    t.match(await command({ id: 3, method: "subscription.subscribe", params: { channels: ["values"] } }), { type: "error", id: 3, error: "no_such_run" });
    t.match(await command({ id: 4, method: "subscription.unsubscribe", params: { subscription_id: "s" } }), {
      type: "error",
      id: 4,
      error: "no_such_subscription",
    });
    t.equal((await fetch(`${srv.url}/threads/${threadId}`)).status, 404, "no thread was created");

    // Once a run was started, getTree names it; subscriptions are made on the event stream, not in a command's answer.
    const thread = await srv.client.threads.create();
    await srv.client.runs.wait(thread.thread_id, "agent", { input: { messages: [{ role: "user", content: "hi" }] } });
    const used = async (body: unknown) =>
      (
        await fetch(`${srv.url}/threads/${thread.thread_id}/commands`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(body),
        })
      ).json();
    t.match(await used({ id: 5, method: "agent.getTree" }), {
      type: "success",
      id: 5,
      result: { tree: { namespace: [], status: "completed", graph_name: "agent" } },
    });
    t.match(await used({ id: 6, method: "subscription.subscribe", params: { channels: ["values"] } }), {
      type: "error",
      id: 6,
      error: "not_supported",
      message: /stream\/events/,
    });
  });

  t.test("websocket: the subscribe answer counts the events it replays, and comes before them", async (t) => {
    const thread = await srv.client.threads.create();
    await srv.client.runs.wait(thread.thread_id, "agent", { input: { messages: [{ role: "user", content: "hi" }] } });
    const socket = new WebSocket(`${srv.url.replace(/^http/, "ws")}/threads/${thread.thread_id}/stream/events`);
    t.teardown(() => socket.close());
    const frames: { type: string; id?: number; result?: { replayed_events?: number; subscription_id?: string }; method?: string }[] = [];
    let notify = () => {};
    socket.on("message", (data: Buffer) => {
      frames.push(JSON.parse(data.toString("utf8")));
      notify();
    });
    await new Promise<void>((resolve, reject) => socket.once("open", () => resolve()).once("error", reject));
    const waitFor = (predicate: () => boolean) =>
      new Promise<void>((resolve) => {
        if (predicate()) return resolve();
        notify = () => predicate() && resolve();
      });
    socket.send(JSON.stringify({ id: 1, method: "subscription.subscribe", params: { channels: ["lifecycle", "values"] } }));
    await waitFor(() => frames.some((f) => f.type === "success" && f.id === 1));
    const ack = frames.find((f) => f.id === 1)!;
    t.equal(frames.indexOf(ack), 0, "the answer is the first frame");
    const replayed = ack.result?.replayed_events;
    t.ok(typeof replayed === "number" && replayed > 0, `replayed_events counts the run's events (${replayed})`);
    // The run ended: its lifecycle ends with completed; every event of it is a replayed one.
    await waitFor(() =>
      frames.some(
        (f) =>
          f.type === "event" &&
          f.method === "lifecycle" &&
          (f as unknown as Event).params.namespace.length === 0 &&
          (f as unknown as Event).params.data.event === "completed",
      ),
    );
    t.equal(frames.filter((f) => f.type === "event").length, replayed, "exactly that many events were replayed");

    // A second subscription, to another channel: its count is its own events only (none: the run streamed no messages).
    socket.send(JSON.stringify({ id: 2, method: "subscription.subscribe", params: { channels: ["messages"] } }));
    await waitFor(() => frames.some((f) => f.type === "success" && f.id === 2));
    t.equal(frames.find((f) => f.id === 2)!.result?.replayed_events, 0, "the messages channel's count");
  });
});
