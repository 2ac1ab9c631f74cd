import t from "tap";
import {
  decideCancel,
  decideClaim,
  decideEnd,
  emptyRunStream,
  evolveRunStream,
  runEventSchemas,
  runStatusOf,
  type RunStreamEvent,
  type RunStreamState,
} from "../../src/domain/runs.js";
import { runsProjection } from "../../projections/runs.js";
import { StreamModeMapper, toWire } from "../../src/runtime/stream-modes.js";
import { schemaForEventType } from "../../src/domain/events.js";
import type { RecordedEvent } from "../../src/eventstore/types.js";
import type { RunRecord } from "../../src/domain/run-record.js";
import { AIMessage, HumanMessage } from "@langchain/core/messages";

/** The run aggregate's pure parts: fold, deciders, projection, stream-mode mapping. */

const NOW = "2026-01-01T00:00:00+00:00";
const fold = (events: { type: string; data: unknown }[]): RunStreamState =>
  events.reduce((s, e, i) => evolveRunStream(s, e as RunStreamEvent, BigInt(i)), emptyRunStream);
const claimCmd = { owner: "w1", now: NOW, nowMs: 1000, leaseMs: 500, takeover: false, baseCheckpointId: "c0" };

t.test("claim: exactly one owner; takeover only when allowed; attempts count", async (t) => {
  const first = decideClaim(emptyRunStream, claimCmd);
  t.ok(first.ok);
  if (!first.ok) return;
  t.match(first.events[0], { type: "RunClaimed", data: { owner: "w1", attempt: 1, lease_expires_at: 1500, base_checkpoint_id: "c0" } });
  const claimed = fold(first.events);
  t.equal(runStatusOf(claimed), "running");
  t.same(decideClaim(claimed, { ...claimCmd, owner: "w2" }), { ok: false, kind: "conflict", detail: "run already claimed" });
  const takeover = decideClaim(claimed, { ...claimCmd, owner: "w2", takeover: true, baseCheckpointId: "c9" });
  t.ok(takeover.ok);
  if (!takeover.ok) return;
  t.match(takeover.events[0].data, { owner: "w2", attempt: 2, recovered_from: "w1" });
  const retaken = fold([...first.events, ...takeover.events]);
  t.equal(retaken.base_checkpoint_id, "c0", "a takeover keeps the base of the first attempt");
  const ended = fold([...first.events, { type: "RunEnded", data: { status: "success", ended_at: NOW } }]);
  t.same(decideClaim(ended, { ...claimCmd, takeover: true }), { ok: false, kind: "conflict", detail: "run already ended" });
  t.equal(runStatusOf(ended), "success");
});

t.test("cancel: a pending run ends now; a running one gets a request once; an ended one is left alone", async (t) => {
  const pending = decideCancel(emptyRunStream, "rollback", NOW);
  t.match(pending, { ok: true, events: [{ type: "RunEnded", data: { status: "rollback" } }], endsNow: { status: "rollback" } });
  const running = fold((decideClaim(emptyRunStream, claimCmd) as { events: { type: string; data: unknown }[] }).events);
  const request = decideCancel(running, "interrupt", NOW);
  t.match(request, { events: [{ type: "RunCancelRequested", data: { action: "interrupt" } }] });
  t.equal(request.endsNow, undefined);
  const requested = evolveRunStream(running, request.events[0] as RunStreamEvent, 1n);
  t.same(decideCancel(requested, "rollback", NOW).events, [], "asked once");
  t.equal(requested.cancel, "interrupt");
  const ended = evolveRunStream(requested, { type: "RunEnded", data: { status: "interrupted", ended_at: NOW } }, 2n);
  t.same(decideCancel(ended, "interrupt", NOW).events, []);
  t.equal(runStatusOf(ended), "interrupted");
});

t.test("end: only the owner, only once", async (t) => {
  const running = fold((decideClaim(emptyRunStream, claimCmd) as { events: { type: string; data: unknown }[] }).events);
  const data = { status: "success" as const, ended_at: NOW };
  t.ok(decideEnd(running, "w1", data).ok);
  t.notOk(decideEnd(running, "w2", data).ok);
  t.notOk(decideEnd(evolveRunStream(running, { type: "RunEnded", data }, 1n), "w1", data).ok);
});

t.test("event schemas are in the catalogue and reject bad data", async (t) => {
  for (const type of Object.keys(runEventSchemas)) t.ok(schemaForEventType(type), type);
  t.notOk(runEventSchemas.RunEnded.safeParse({ status: "done", ended_at: NOW }).success);
  t.ok(runEventSchemas.RunOutput.safeParse({ event: "values", data: { a: 1 } }).success);
});

const rec = (streamId: string, revision: number, type: string, data: unknown): RecordedEvent => ({
  streamId,
  id: `${streamId}-${revision}`,
  type,
  revision: BigInt(revision),
  position: 0n,
  data,
  metadata: {},
  created: new Date(0),
});

t.test("projection: runs by id and per thread; rollback and delete remove them", async (t) => {
  const run = { run_id: "r1", thread_id: "t1", status: "pending", kwargs: {} } as unknown as RunRecord;
  const apply = <S>(p: { key(e: RecordedEvent): string | undefined; evolve(s: S | undefined, e: RecordedEvent): S | undefined }, events: RecordedEvent[]) => {
    const m = new Map<string, S>();
    for (const e of events) {
      const k = p.key(e);
      if (k === undefined) continue;
      const next = p.evolve(m.get(k), e);
      if (next === undefined) m.delete(k);
      else m.set(k, next);
    }
    return m;
  };
  const enq = rec("thread-t1", 1, "RunEnqueued", { run, thread_metadata: {} });
  const claim = rec("run-r1", 0, "RunClaimed", { owner: "w", attempt: 1, claimed_at: NOW, lease_expires_at: 0 });
  const out = rec("run-r1", 1, "RunOutput", { event: "values", data: {} });
  const end = rec("run-r1", 2, "RunEnded", { status: "success", ended_at: NOW });
  const fin = rec("thread-t1", 2, "RunFinished", { run_id: "r1", status: "success", finished_at: NOW });
  const runs = apply(runsProjection, [enq, claim, out, end, fin]);
  t.match(runs.get("r1"), { stream: { revision: 2n, attempt: 1, ended: { status: "success" } }, threadFinished: true });
  const rolledBack = rec("thread-t1", 2, "RunFinished", { run_id: "r1", status: "rollback", finished_at: NOW });
  t.equal(apply(runsProjection, [enq, claim, rolledBack]).get("r1"), undefined);
  t.equal(apply(runsProjection, [enq, fin, rec("thread-t1", 3, "RunDeleted", { run_id: "r1", deleted_at: NOW })]).get("r1"), undefined);
});

t.test("stream modes: names, namespaces, messages accumulation, wire shape of messages", async (t) => {
  const m = new StreamModeMapper(["values", "updates", "messages-tuple", "messages"], true);
  t.same(m.libModes().sort(), ["messages", "updates", "values"]);
  t.equal(m.needsEvents, true, "messages needs streamEvents");
  const ai = new AIMessage({ id: "a1", content: "hey" });
  const out = m.fromChunk(["child:1"], "updates", { node: { messages: [ai] } });
  t.equal(out[0].event, "updates|child:1");
  t.match(out[0].data, { node: { messages: [{ id: "a1", content: "hey", type: "ai" }] } });
  const values = m.fromChunk([], "values", { messages: [new HumanMessage({ id: "h1", content: "hi" }), ai] });
  t.same(
    values.map((e) => e.event),
    ["values", "messages/complete"],
  );
  t.same(
    m.fromChunk([], "values", { messages: [ai] }).map((e) => e.event),
    ["values"],
    "complete once per id",
  );
  t.same(m.lastValues && Object.keys(m.lastValues as object), ["messages"]);
  m.fromChunk([], "values", { __interrupt__: [] });
  t.equal(m.interrupted, true);
  t.same(
    m.fromChunk(undefined, "messages", [ai, { langgraph_node: "n" }]).map((e) => e.event),
    ["messages"],
  );
  const partial = m.fromStreamEvent({ event: "on_chat_model_stream", data: { chunk: new AIMessage({ id: "p1", content: "he" }) }, metadata: { x: 1 } }, "root");
  t.same(
    partial.map((e) => e.event),
    ["messages/metadata", "messages/partial"],
  );
  t.same(toWire({ n: 1n, u: undefined }), { n: "1" });
  const plain = new StreamModeMapper(["updates"], false);
  t.same(plain.fromChunk(undefined, "values", { a: 1 }), [], "values is only asked for internally");
  t.equal(plain.needsEvents, false);
});

t.test("messages-tuple: the call's metadata converted once, each token's text what JSON.stringify gives", async (t) => {
  const { jsonTextOf } = await import("../../src/eventstore/json-text.js");
  const m = new StreamModeMapper(["messages-tuple"], false);
  // LangGraph hands out one metadata object for every token of a model call.
  const metadata = { langgraph_node: "llm", tags: ["a"], __pregel_task_id: "internal", ls_model: 'q"\u2028\u{1F600}' };
  const tokens = ["he", 'l"l\\o', "\u2028!"].map((content) => m.fromChunk(undefined, "messages", [new AIMessage({ id: "m1", content }), metadata])[0]!);
  for (const [i, token] of tokens.entries()) {
    t.equal(token.event, "messages");
    t.equal(jsonTextOf(token), JSON.stringify(token), `token ${i}: its kept text is its data's JSON`);
    t.match(JSON.parse(jsonTextOf(token)!), {
      event: "messages",
      data: [
        { type: "ai", id: "m1" },
        { langgraph_node: "llm", tags: ["a"] },
      ],
    });
    t.notOk("__pregel_task_id" in (token.data as [unknown, Record<string, unknown>])[1], "internal keys left out");
  }
  t.same(
    tokens.map((e) => (e.data as [{ content: string }])[0].content),
    ["he", 'l"l\\o', "\u2028!"],
  );
  t.equal((tokens[0]!.data as unknown[])[1], (tokens[2]!.data as unknown[])[1], "one wire form of the metadata for the call");
  t.ok(Object.isFrozen(tokens[0]) && Object.isFrozen((tokens[0]!.data as unknown[])[1]), "frozen, so the kept text cannot go stale");
  const other = m.fromChunk(undefined, "messages", [new AIMessage({ id: "m2", content: "x" }), { langgraph_node: "other" }])[0]!;
  t.match(JSON.parse(jsonTextOf(other)!), { data: [{ id: "m2" }, { langgraph_node: "other" }] }, "another call, its own metadata");
});

t.test("executeRun with a streaming chat model: messages/metadata once, accumulated partials, complete", async (t) => {
  const { FakeListChatModel } = await import("@langchain/core/utils/testing");
  const { MemorySaver, StateGraph, StateSchema, MessagesValue, START, END } = await import("@langchain/langgraph");
  const { executeRun } = await import("../../src/runtime/execute-run.js");
  const model = new FakeListChatModel({ responses: ["abc"] });
  const State = new StateSchema({ messages: MessagesValue });
  const graph = new StateGraph(State)
    .addNode("llm", async (s) => ({ messages: [await model.invoke(s.messages)] }))
    .addEdge(START, "llm")
    .addEdge("llm", END)
    .compile();
  const saver = new MemorySaver();
  const run = {
    run_id: "r-llm",
    thread_id: "t-llm",
    assistant_id: "a",
    created_at: NOW,
    updated_at: NOW,
    status: "pending",
    metadata: {},
    multitask_strategy: "enqueue",
    kwargs: {
      input: { messages: [{ role: "user", content: "hi" }] },
      config: { configurable: { thread_id: "t-llm", graph_id: "g" } },
      context: {},
      stream_mode: ["messages", "values"],
      temporary: false,
      subgraphs: false,
      resumable: false,
    },
  } as unknown as RunRecord;
  const events: { event: string; data: unknown }[] = [];
  const outcome = await executeRun({
    run,
    graphs: { get: async () => graph as never },
    checkpointer: saver,
    signal: new AbortController().signal,
    resume: false,
    emit: (e) => events.push(e),
  });
  t.equal(outcome.status, "success");
  const names = events.map((e) => e.event);
  t.equal(names.filter((n) => n === "messages/metadata").length, 1, names.join(","));
  const partials = events.filter((e) => e.event === "messages/partial").map((e) => (e.data as { content: string }[])[0].content);
  t.same(partials, ["a", "ab", "abc"], "partials accumulate");
  const complete = events.filter((e) => e.event === "messages/complete").flatMap((e) => (e.data as { content: string }[]).map((m) => m.content));
  t.same(complete, ["hi", "abc"]);
  t.ok(names.includes("values"));
});
