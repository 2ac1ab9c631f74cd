import t from "tap";
import { startTestServer, type TestServer } from "../support/server.js";

/** Streaming runs: every stream mode through the SDK, resuming with Last-Event-ID, and the SSE bytes on the wire. */

const human = (content: string) => ({ role: "user", content });
type Part = { event: string; data: unknown; id?: string };

async function collect(iter: AsyncIterable<Part>): Promise<Part[]> {
  const out: Part[] = [];
  for await (const p of iter) out.push({ event: p.event, data: p.data, id: p.id });
  return out;
}

const post = (srv: TestServer, path: string, body: unknown, headers: Record<string, string> = {}, signal?: AbortSignal) =>
  fetch(`${srv.url}${path}`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body), signal });

t.test("run streams", async (t) => {
  let srv = await startTestServer();
  t.teardown(() => srv.close());
  const client = () => srv.client;

  t.test("values: metadata first, then every state; ids are stream revisions", async (t) => {
    const thread = await client().threads.create();
    const parts = await collect(client().runs.stream(thread.thread_id, "agent", { input: { messages: [human("hi")] } }) as AsyncIterable<Part>);
    t.same(
      parts.map((p) => p.event),
      ["metadata", "values", "values"],
    );
    t.match(parts[0].data, { run_id: String, attempt: 1 });
    t.match(parts[2].data, {
      messages: [
        { type: "human", content: "hi" },
        { type: "ai", content: "You said: hi", id: "ai-1" },
      ],
    });
    const ids = parts.map((p) => Number(p.id));
    t.ok(
      ids.every((id, i) => Number.isInteger(id) && (i === 0 || id > ids[i - 1])),
      `increasing integer ids ${ids}`,
    );
  });

  t.test("updates, messages-tuple, custom, tasks, checkpoints, debug", async (t) => {
    const thread = await client().threads.create();
    const parts = await collect(
      client().runs.stream(thread.thread_id, "custom", {
        input: { messages: [human("x")] },
        streamMode: ["updates", "messages-tuple", "custom", "tasks", "checkpoints", "debug"],
      }) as AsyncIterable<Part>,
    );
    const by = (e: string) => parts.filter((p) => p.event === e).map((p) => p.data);
    t.same(by("custom"), [
      { progress: 1, of: 2 },
      { progress: 2, of: 2 },
    ]);
    t.match(by("updates"), [{ agent: { messages: [{ type: "ai", content: "done", id: "ai-1" }] } }]);
    const [tuple] = by("messages") as [unknown, Record<string, unknown>][];
    t.match(tuple, [{ type: "ai", content: "done" }, { langgraph_node: "agent" }]);
    const tasks = by("tasks") as Record<string, unknown>[];
    t.match(tasks, [
      { name: "agent", input: Object },
      { name: "agent", result: Object },
    ]);
    const checkpoints = by("checkpoints") as Record<string, unknown>[];
    t.ok(checkpoints.length >= 2);
    t.match(checkpoints[checkpoints.length - 1], {
      values: Object,
      metadata: Object,
      next: [],
      checkpoint: { thread_id: thread.thread_id, checkpoint_id: String },
    });
    t.notOk(JSON.stringify(checkpoints).includes("callbacks"), "no internals leak into checkpoints");
    t.ok((by("debug") as { type: string }[]).some((d) => d.type === "checkpoint"));
    t.notOk(by("values").length, "values not requested, not sent");
  });

  t.test("messages: complete messages from the state", async (t) => {
    const thread = await client().threads.create();
    const parts = await collect(
      client().runs.stream(thread.thread_id, "agent", { input: { messages: [human("m")] }, streamMode: ["messages"] }) as AsyncIterable<Part>,
    );
    const complete = parts.filter((p) => p.event === "messages/complete").flatMap((p) => p.data as { content: string }[]);
    t.same(
      complete.map((m) => m.content),
      ["m", "You said: m"],
    );
  });

  t.test("events: LangChain stream events", async (t) => {
    const thread = await client().threads.create();
    const parts = await collect(
      client().runs.stream(thread.thread_id, "agent", { input: { messages: [human("e")] }, streamMode: ["events"] }) as AsyncIterable<Part>,
    );
    const kinds = parts.filter((p) => p.event === "events").map((p) => (p.data as { event: string }).event);
    t.ok(kinds.includes("on_chain_start") && kinds.includes("on_chain_end"), kinds.join(","));
  });

  t.test("subgraphs: namespaced event names", async (t) => {
    const thread = await client().threads.create();
    const parts = await collect(
      client().runs.stream(thread.thread_id, "subgraph", {
        input: { messages: [human("s")] },
        streamMode: ["updates"],
        streamSubgraphs: true,
      }) as AsyncIterable<Part>,
    );
    const names = parts.map((p) => p.event);
    t.ok(names.includes("updates"), "root updates keep the bare name");
    t.ok(
      names.some((n) => /^updates\|child:[0-9a-f-]+$/.test(n)),
      names.join(" "),
    );
    t.ok(
      names.some((n) => /^updates\|child:[0-9a-f-]+\|grandchild:[0-9a-f-]+$/.test(n)),
      "nested namespaces",
    );
  });

  t.test("a failing run ends with an error event", async (t) => {
    const thread = await client().threads.create();
    const parts = await collect(client().runs.stream(thread.thread_id, "error", { input: { messages: [human("x")] } }) as AsyncIterable<Part>);
    t.same(parts[parts.length - 1].event, "error");
    t.same(parts[parts.length - 1].data, { error: "CustomError", message: "Boo!" });
  });

  t.test("joinStream replays from Last-Event-ID, also after the run ended and after a restart", async (t) => {
    const thread = await client().threads.create();
    let runId = "";
    const original = await collect(
      client().runs.stream(thread.thread_id, "agent", {
        input: { messages: [human("r")] },
        streamMode: ["values", "updates"],
        onRunCreated: (m) => (runId = m.run_id),
      }) as AsyncIterable<Part>,
    );
    t.ok(runId, "onRunCreated saw Content-Location");
    t.same(await collect(client().runs.joinStream(thread.thread_id, runId, { lastEventId: "-1" }) as AsyncIterable<Part>), original, "from the start");
    const afterFirst = await collect(client().runs.joinStream(thread.thread_id, runId, { lastEventId: original[1].id }) as AsyncIterable<Part>);
    t.same(afterFirst, original.slice(2), "right after the given id");
    srv = await srv.restart();
    t.same(
      await collect(client().runs.joinStream(thread.thread_id, runId, { lastEventId: original[0].id }) as AsyncIterable<Part>),
      original.slice(1),
      "after a restart",
    );
    t.same(
      await collect(client().runs.joinStream(thread.thread_id, runId, { lastEventId: original[original.length - 1].id }) as AsyncIterable<Part>),
      [],
      "nothing after the last event",
    );
    const res = await fetch(`${srv.url}/threads/${thread.thread_id}/runs/${runId}/stream`, { headers: { "Last-Event-ID": "x" } });
    t.equal(res.status, 422);
  });

  t.test("join stream ?stream_mode= keeps only those modes (ids unchanged)", async (t) => {
    const thread = await client().threads.create();
    let runId = "";
    const all = await collect(
      client().runs.stream(thread.thread_id, "agent", {
        input: { messages: [human("f")] },
        streamMode: ["values", "updates"],
        onRunCreated: (m) => (runId = m.run_id),
      }) as AsyncIterable<Part>,
    );
    const only = await collect(client().runs.joinStream(thread.thread_id, runId, { lastEventId: "-1", streamMode: ["updates"] }) as AsyncIterable<Part>);
    t.same(
      only,
      all.filter((p) => p.event === "metadata" || p.event === "updates"),
    );
  });

  t.test('joining no such run: 200 and one `error` event "Run not found", as the official server; a malformed id stays a 422', async (t) => {
    const thread = await client().threads.create();
    const other = await client().threads.create();
    const run = await client().runs.create(other.thread_id, "agent", { input: { messages: [human("elsewhere")] } });
    await client().runs.join(other.thread_id, run.run_id);
    const unknownRun = "00000000-0000-4000-8000-000000000000";
    for (const [what, tid, rid] of [
      ["an unknown run id", thread.thread_id, unknownRun],
      ["a run of another thread", thread.thread_id, run.run_id],
      ["an unknown thread", unknownRun, run.run_id],
    ]) {
      const res = await fetch(`${srv.url}/threads/${tid}/runs/${rid}/stream`);
      t.equal(res.status, 200, what);
      t.match(res.headers.get("content-type"), /^text\/event-stream/, what);
      t.equal(res.headers.get("content-location"), null, `${what}: no run to locate`);
      t.equal(await res.text(), 'event: error\r\ndata: "Run not found"\r\n\r\n', `${what}: one error event, then the end`);
      t.same(
        await collect(client().runs.joinStream(tid, rid) as AsyncIterable<Part>),
        [{ event: "error", data: "Run not found", id: undefined }],
        `${what}: through the SDK`,
      );
    }
    const own = await collect(client().runs.joinStream(other.thread_id, run.run_id, { lastEventId: "-1" }) as AsyncIterable<Part>);
    t.same(own.map((p) => p.event).slice(0, 1), ["metadata"], "the run on its own thread streams as usual");
    t.notOk(own.some((p) => p.event === "error"));
    const malformed = await fetch(`${srv.url}/threads/${thread.thread_id}/runs/not-a-uuid/stream`);
    t.equal(malformed.status, 422, "a malformed run id is still refused before any stream");
    t.match(await malformed.json(), { detail: String });
  });

  t.test("joining a running run streams it live to the end", async (t) => {
    const thread = await client().threads.create();
    const run = await client().runs.create(thread.thread_id, "delay", { input: { delay: 100 }, streamMode: ["updates"] });
    const parts = await collect(client().runs.joinStream(thread.thread_id, run.run_id) as AsyncIterable<Part>);
    t.same(
      parts.map((p) => p.event),
      ["metadata", "updates"],
    );
    t.equal((await client().runs.get(thread.thread_id, run.run_id)).status, "success", "the run is over when the stream ends");
  });

  t.test("SSE bytes: framing, ids, headers (threads and stateless)", async (t) => {
    const thread = await client().threads.create();
    const res = await post(srv, `/threads/${thread.thread_id}/runs/stream`, {
      assistant_id: "agent",
      input: { messages: [human("b")] },
      stream_mode: "updates",
    });
    t.equal(res.status, 200);
    t.match(res.headers.get("content-type"), /^text\/event-stream/);
    const location = res.headers.get("content-location")!;
    t.match(location, new RegExp(`^/threads/${thread.thread_id}/runs/[0-9a-f-]{36}$`));
    t.equal(res.headers.get("location"), `${location}/stream`);
    const text = await res.text();
    const runId = location.split("/").pop();
    t.match(text, new RegExp(`^event: metadata\\r\\ndata: \\{"run_id":"${runId}","attempt":1\\}\\r\\nid: \\d+\\r\\n\\r\\n`));
    const frames = text.split("\r\n\r\n").filter(Boolean);
    t.equal(frames.length, 2);
    t.match(frames[1], /^event: updates\r\ndata: \{"agent":\{"messages":\[\{.*"type":"ai"\}\]\}\}\r\nid: \d+$/);
    t.ok(text.endsWith("\r\n\r\n"));

    const stateless = await post(srv, "/runs/stream", { assistant_id: "agent", input: { messages: [human("s")] } });
    const statelessLocation = stateless.headers.get("content-location")!;
    t.match(statelessLocation, /^\/runs\/[0-9a-f-]{36}$/);
    t.equal(stateless.headers.get("location"), `${statelessLocation}/stream`);
    const body = await stateless.text();
    t.match(body, /^event: metadata\r\ndata: .*\r\nid: \d+\r\n\r\nevent: values\r\n/);
  });

  t.test("heartbeat comment while idle", async (t) => {
    const thread = await client().threads.create();
    const res = await post(srv, `/threads/${thread.thread_id}/runs/stream`, { assistant_id: "delay", input: { delay: 5_600 }, stream_mode: "updates" });
    const text = await res.text();
    t.match(text, /\r\n\r\n: heartbeat\r\n\r\nevent: updates/);
  });

  t.test("disconnect: the run continues by default, on_disconnect=cancel interrupts it", async (t) => {
    for (const [onDisconnect, expected] of [
      ["continue", "success"],
      ["cancel", "interrupted"],
    ] as const) {
      const thread = await client().threads.create();
      const controller = new AbortController();
      const res = await post(
        srv,
        `/threads/${thread.thread_id}/runs/stream`,
        {
          assistant_id: "delay",
          input: { delay: onDisconnect === "cancel" ? 60_000 : 300 },
          on_disconnect: onDisconnect,
        },
        {},
        controller.signal,
      );
      const runId = res.headers.get("content-location")!.split("/").pop()!;
      const reader = res.body!.getReader();
      await reader.read(); // the metadata event: the run was claimed
      controller.abort();
      await reader.cancel().catch(() => undefined);
      await client().runs.join(thread.thread_id, runId);
      t.equal((await client().runs.get(thread.thread_id, runId)).status, expected, `on_disconnect=${onDisconnect}`);
    }
  });

  t.test("join stream with cancel_on_disconnect=1 cancels on leave", async (t) => {
    const thread = await client().threads.create();
    const run = await client().runs.create(thread.thread_id, "delay", { input: { delay: 60_000 } });
    const controller = new AbortController();
    const res = await fetch(`${srv.url}/threads/${thread.thread_id}/runs/${run.run_id}/stream?cancel_on_disconnect=1`, { signal: controller.signal });
    const reader = res.body!.getReader();
    await reader.read();
    controller.abort();
    await reader.cancel().catch(() => undefined);
    await client().runs.join(thread.thread_id, run.run_id);
    t.equal((await client().runs.get(thread.thread_id, run.run_id)).status, "interrupted");
  });
});
