import t from "tap";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@langchain/langgraph-sdk";
import { startTestServer, type TestServer } from "../support/server.js";
import { signToken } from "../auth/jwt.js";

/**
 * GET /threads/{id}/stream through the official SDK (`client.threads.joinStream`) against the real
 * server: every run of the thread in order (runs enqueued while it is open too), resuming with
 * Last-Event-ID after a restart, each stream_mode, starting "from now", the end at deletion,
 * bad input and custom auth.
 */

const human = (content: string) => ({ role: "user", content });
type Part = { event: string; data: unknown; id?: string };
const DEADLINE_MS = 20_000;

/** Reads parts until `done` says the wanted ones arrived (the stream itself never ends), then stops it. */
async function take(iter: AsyncIterable<Part>, done: (parts: Part[]) => boolean, controller: AbortController): Promise<Part[]> {
  const parts: Part[] = [];
  const timer = setTimeout(() => controller.abort(), DEADLINE_MS);
  try {
    for await (const p of iter) {
      parts.push({ event: p.event, data: p.data, id: p.id });
      if (done(parts)) break;
    }
  } finally {
    clearTimeout(timer);
    controller.abort();
  }
  return parts;
}

const runsDone = (n: number) => (parts: Part[]) =>
  parts.filter((p) => p.event === "metadata" && (p.data as { status?: string }).status === "run_done").length >= n;
const idKey = (id: string | undefined) => id!.split("-").map(BigInt) as [bigint, bigint];
const increasing = (parts: Part[]) =>
  parts.every((p, i) => {
    if (i === 0) return true;
    const [a, b] = idKey(parts[i - 1].id);
    const [c, d] = idKey(p.id);
    return c > a || (c === a && d > b);
  });

function join(client: Client, threadId: string, options: { lastEventId?: string; streamMode?: ("run_modes" | "lifecycle" | "state_update")[] } = {}) {
  const controller = new AbortController();
  const iter = client.threads.joinStream(threadId, { ...options, signal: controller.signal }) as AsyncIterable<Part>;
  return { iter, controller };
}

t.test("thread stream", async (t) => {
  let srv: TestServer = await startTestServer();
  t.teardown(() => srv.close());

  const thread = await srv.client.threads.create();
  const tid = thread.thread_id;
  const first = await srv.client.runs.create(tid, "agent", { input: { messages: [human("one")] } });
  await srv.client.runs.join(tid, first.run_id);
  let recorded: Part[] = [];
  let second = "";

  t.test("from the beginning: every run in order, a run enqueued while it is open too", async (t) => {
    const { iter, controller } = join(srv.client, tid, { lastEventId: "-" });
    const parts: Part[] = [];
    let started = false;
    let creating: Promise<unknown> | undefined;
    recorded = await take(
      iter,
      (seen) => {
        parts.splice(0, parts.length, ...seen);
        if (!started && runsDone(1)(seen)) {
          started = true;
          // The second run is created while the stream is open (and idle).
          // (A run at its thread's head may end, and be streamed, before its creation is answered.)
          creating = srv.client.runs.create(tid, "agent", { input: { messages: [human("two")] } }).then((r) => (second = r.run_id));
        }
        return runsDone(2)(seen);
      },
      controller,
    );
    await creating;
    t.ok(second, "the second run was created");
    const runDone = recorded.filter((p) => p.event === "metadata" && (p.data as { status?: string }).status === "run_done").map((p) => p.data);
    t.same(runDone, [
      { status: "run_done", run_id: first.run_id, run_status: "success" },
      { status: "run_done", run_id: second, run_status: "success" },
    ]);
    t.same(
      recorded.map((p) => p.event),
      ["metadata", "values", "values", "metadata", "metadata", "values", "values", "metadata"],
    );
    t.match(recorded[0].data, { run_id: first.run_id, attempt: 1 });
    t.match(recorded[4].data, { run_id: second, attempt: 1 });
    t.same(
      (recorded[2].data as { messages: { content: string }[] }).messages.map((m) => m.content),
      ["one", "You said: one"],
    );
    t.same(
      (recorded[6].data as { messages: { content: string }[] }).messages.map((m) => m.content),
      ["one", "You said: one", "two", "You said: two"],
    );
    t.ok(
      recorded.every((p) => /^\d+-\d+$/.test(p.id ?? "")),
      "every event has an id",
    );
    t.ok(increasing(recorded), `ids increase: ${recorded.map((p) => p.id).join(" ")}`);
  });

  t.test("Last-Event-ID after a restart: exactly what followed", async (t) => {
    srv = await srv.restart();
    for (const at of [1, 3, 5]) {
      const { iter, controller } = join(srv.client, tid, { lastEventId: recorded[at].id });
      const rest = await take(iter, runsDone(at < 3 ? 2 : 1), controller);
      t.same(rest, recorded.slice(at + 1), `resumed after ${recorded[at].id}`);
    }
  });

  t.test("stream modes: run_modes, lifecycle, state_update", async (t) => {
    const state = await srv.client.threads.updateState(tid, { values: { messages: [human("three")] } });
    t.match(state, { checkpoint: { thread_id: tid } });
    const all = join(srv.client, tid, { lastEventId: "-", streamMode: ["run_modes", "lifecycle", "state_update"] });
    const everything = await take(all.iter, (seen) => seen.some((p) => p.event === "state_update"), all.controller);
    const summary = everything.map((p) => (p.event === "metadata" ? ((p.data as { status?: string }).status ?? "metadata") : p.event));
    t.same(summary, ["run_started", "metadata", "values", "values", "run_done", "run_started", "metadata", "values", "values", "run_done", "state_update"]);
    const update = everything[everything.length - 1].data as { thread_id: string; state: { values: { messages: { content: string }[] }; next: string[] } };
    t.equal(update.thread_id, tid);
    t.same(
      update.state.values.messages.map((m) => m.content),
      ["one", "You said: one", "two", "You said: two", "three"],
    );
    t.same(update.state.next, []);
    t.ok(increasing(everything));

    const lifecycle = join(srv.client, tid, { lastEventId: "-", streamMode: ["lifecycle"] });
    const starts = await take(lifecycle.iter, runsDone(2), lifecycle.controller);
    t.same(
      starts.map((p) => p.data),
      [
        { status: "run_started", run_id: first.run_id, attempt: 1 },
        { status: "run_done", run_id: first.run_id, run_status: "success" },
        { status: "run_started", run_id: second, attempt: 1 },
        { status: "run_done", run_id: second, run_status: "success" },
      ],
    );

    const updates = join(srv.client, tid, { lastEventId: "-", streamMode: ["state_update"] });
    const onlyUpdates = await take(updates.iter, (seen) => seen.length >= 1, updates.controller);
    t.same(
      onlyUpdates.map((p) => p.event),
      ["state_update"],
    );
    t.equal(onlyUpdates[0].id, everything[everything.length - 1].id, "same event, same id in every mode");

    const runModes = join(srv.client, tid, { lastEventId: "-" });
    const defaults = await take(runModes.iter, runsDone(2), runModes.controller);
    t.same(defaults, recorded, "run_modes is the default");
  });

  t.test("without Last-Event-ID: from now on (the runs that come)", async (t) => {
    const controller = new AbortController();
    const res = await fetch(`${srv.url}/threads/${tid}/stream?stream_mode=run_modes&stream_mode=lifecycle`, { signal: controller.signal });
    t.equal(res.status, 200);
    t.match(res.headers.get("content-type"), /^text\/event-stream/);
    t.equal(res.headers.get("location"), `/threads/${tid}/stream`);
    // Headers are sent once the start is fixed: a run created now is after it.
    const third = await srv.client.runs.create(tid, "agent", { input: { messages: [human("four")] } });
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    let text = "";
    const deadline = setTimeout(() => controller.abort(), DEADLINE_MS);
    while (!text.includes('"run_done"')) {
      const { value, done } = await reader.read();
      if (done) break;
      text += value;
    }
    clearTimeout(deadline);
    controller.abort();
    const events = text
      .split("\r\n\r\n")
      .filter((b) => b.startsWith("event:"))
      .map((b) => JSON.parse(b.split("\r\n")[1].slice("data: ".length)) as Record<string, unknown>);
    t.equal(events[0].status, "run_started");
    t.equal(events[0].run_id, third.run_id);
    t.notOk(text.includes(first.run_id) || text.includes(second), "earlier runs are not replayed");
    t.match(events[events.length - 1], { status: "run_done", run_id: third.run_id });
  });

  t.test("a deleted thread ends its stream", async (t) => {
    const other = await srv.client.threads.create();
    const controller = new AbortController();
    const deadline = setTimeout(() => controller.abort(), DEADLINE_MS);
    const res = await fetch(`${srv.url}/threads/${other.thread_id}/stream`, { headers: { "last-event-id": "-" }, signal: controller.signal });
    t.equal(res.status, 200);
    await srv.client.threads.delete(other.thread_id);
    const text = await res.text();
    clearTimeout(deadline);
    t.notOk(controller.signal.aborted, "ended by the deletion, not the deadline");
    t.notMatch(text, /event:/, "no events");
  });

  t.test("a server that stops ends its open thread streams", async (t) => {
    const res = await fetch(`${srv.url}/threads/${tid}/stream`);
    t.equal(res.status, 200);
    const body = res.text();
    srv = await srv.restart();
    t.notMatch(await body, /event:/, "ended without events (none came)");
  });

  t.test("bad input: 422; unknown thread: 404", async (t) => {
    const bad = await fetch(`${srv.url}/threads/${tid}/stream?stream_mode=everything`);
    t.equal(bad.status, 422);
    t.match(await bad.json(), { detail: /stream_mode.*everything/ });
    const badId = await fetch(`${srv.url}/threads/${tid}/stream`, { headers: { "last-event-id": "abc" } });
    t.equal(badId.status, 422);
    t.match(await badId.json(), { detail: /Last-Event-ID/ });
    const missing = await fetch(`${srv.url}/threads/00000000-0000-4000-8000-000000000000/stream`);
    t.equal(missing.status, 404);
    const notUuid = await fetch(`${srv.url}/threads/nope/stream`);
    t.equal(notUuid.status, 422);
  });
});

t.test("custom auth: threads:read on the thread; another user's thread is not found", async (t) => {
  const project = path.join(path.join(path.dirname(fileURLToPath(import.meta.url)), ".."), "auth", "langgraph.json");
  const srv = await startTestServer({ env: { LANGGRAPH_JSON: project } });
  t.teardown(() => srv.close());
  const scopes = ["threads:read", "threads:write", "assistants:read", "assistants:write"];
  const alice = new Client({ apiUrl: srv.url, defaultHeaders: { authorization: `Bearer ${await signToken("alice", scopes)}` } });
  const bobToken = await signToken("bob", scopes);
  const thread = await alice.threads.create();
  await alice.runs.wait(thread.thread_id, "agent", { input: { messages: [human("mine")] } });

  const theirs = await fetch(`${srv.url}/threads/${thread.thread_id}/stream`, { headers: { authorization: `Bearer ${bobToken}`, "last-event-id": "-" } });
  t.equal(theirs.status, 404);
  t.equal(theirs.headers.get("content-type")?.startsWith("application/json"), true, "refused before any SSE");
  const anonymous = await fetch(`${srv.url}/threads/${thread.thread_id}/stream`);
  t.equal(anonymous.status, 401);

  const { iter, controller } = join(alice, thread.thread_id, { lastEventId: "-" });
  const own = await take(iter, runsDone(1), controller);
  t.same(
    own.map((p) => p.event),
    ["metadata", "values", "values", "metadata"],
  );
});
