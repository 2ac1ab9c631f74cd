import t from "tap";
import type { RecordedEvent } from "../../src/eventstore/types.js";
import { matchesFilter, newRunMapState, protocolEventsOf, runStartOf, seqOf, type ProtocolEvent } from "../../src/protocol/log-events.js";
import { newProtocolChunkState, protocolRecordsOf } from "../../src/runtime/protocol-chunks.js";

/** The pure parts of the thread streaming protocol: chunks → records (runtime), log events → protocol events and filters (edge). */

const at = new Date("2026-01-01T00:00:00Z");
const logEvent = (position: number, type: string, data: unknown): RecordedEvent => ({
  streamId: "run-x",
  id: `e${position}`,
  type,
  revision: BigInt(position),
  position: BigInt(position),
  data,
  metadata: {},
  created: at,
});

t.test("chunks → protocol records", async (t) => {
  const state = newProtocolChunkState();
  t.same(protocolRecordsOf(state, [], "values", { messages: [] }), [{ method: "values", namespace: [], data: { messages: [] } }]);
  t.same(protocolRecordsOf(state, [], "updates", { agent: { n: 1 } }), [
    { method: "updates", namespace: [], node: "agent", data: { node: "agent", values: { n: 1 } } },
  ]);
  const interrupt = { __interrupt__: [{ id: "i1", value: { question: "?" } }] };
  t.same(protocolRecordsOf(state, [], "updates", interrupt), [
    { method: "input.requested", namespace: [], data: { interrupt_id: "i1", payload: { question: "?" } } },
  ]);
  t.same(protocolRecordsOf(state, [], "values", interrupt), [], "an interrupt is announced once; an interrupt-only values chunk is dropped");
  const sub = protocolRecordsOf(state, ["child:1"], "custom", { progress: 1 });
  t.same(sub, [
    { method: "lifecycle", namespace: ["child:1"], data: { event: "started", graph_name: "child" } },
    { method: "custom", namespace: ["child:1"], data: { payload: { progress: 1 } } },
  ]);
  t.same(
    protocolRecordsOf(state, ["child:1"], "custom", { name: "x", payload: 2 }),
    [{ method: "custom", namespace: ["child:1"], data: { name: "x", payload: 2 } }],
    "a subgraph is announced once",
  );
  const message = protocolRecordsOf(state, ["agent:task"], "messages", [{ event: "message-start", id: "m1" }, { langgraph_node: "agent" }]);
  t.same(
    message,
    [{ method: "messages", namespace: ["agent:task"], node: "agent", data: { event: "message-start", id: "m1" } }],
    "a node's task namespace is not a subgraph",
  );
});

t.test("a run's start announced at its enqueue is not announced again at its first claim", async (t) => {
  const state = newRunMapState("agent");
  const start = runStartOf(state, { position: 7n, created: at });
  t.same(
    [start.seq, start.method, start.params],
    [seqOf(7n, 0), "lifecycle", { namespace: [], timestamp: at.getTime(), data: { event: "running", graph_name: "agent" } }],
  );
  t.same(protocolEventsOf(state, logEvent(10, "RunClaimed", { attempt: 1 })), [], "the claim adds nothing");
});

t.test("log events → protocol events: seq from the log position, lifecycle from claims and ends", async (t) => {
  const state = newRunMapState("agent");
  t.same(
    protocolEventsOf(state, logEvent(10, "RunClaimed", { attempt: 1 })).map((e) => [e.seq, e.method, e.params.data]),
    [[seqOf(10n, 0), "lifecycle", { event: "running", graph_name: "agent" }]],
  );
  t.same(protocolEventsOf(state, logEvent(11, "RunClaimed", { attempt: 2 })), [], "a takeover continues the run");
  const [values] = protocolEventsOf(state, logEvent(12, "RunOutput", { event: "protocol", data: { method: "values", namespace: [], data: { a: 1 } } }));
  t.same(values, {
    type: "event",
    event_id: String(12 * 256),
    seq: 12 * 256,
    method: "values",
    params: { namespace: [], timestamp: at.getTime(), data: { a: 1 } },
  });
  t.same(protocolEventsOf(state, logEvent(13, "RunOutput", { event: "values", data: {} })), [], "v1 outputs are not protocol events");
  protocolEventsOf(
    state,
    logEvent(14, "RunOutput", { event: "protocol", data: { method: "input.requested", namespace: [], data: { interrupt_id: "i1", payload: 1 } } }),
  );
  const end = protocolEventsOf(
    state,
    logEvent(15, "RunEnded", {
      status: "interrupted",
      interrupts: {
        task: [
          { id: "i1", value: 1 },
          { id: "i2", value: 2 },
        ],
      },
      ended_at: "",
    }),
  );
  t.same(
    end.map((e) => [e.seq, e.method, e.params.data]),
    [
      [15 * 256, "input.requested", { interrupt_id: "i2", payload: 2 }],
      [15 * 256 + 1, "lifecycle", { event: "interrupted", graph_name: "agent" }],
    ],
    "interrupts not announced by the chunks are announced at the end, once",
  );
  const failed = protocolEventsOf(newRunMapState("g"), logEvent(20, "RunEnded", { status: "error", error: { error: "Boom", message: "boom" }, ended_at: "" }));
  t.same(failed[0]!.params.data, { event: "failed", graph_name: "g", error: "boom" });
});

t.test("filters: channels, custom:<name>, namespaces with depth, since", async (t) => {
  const ev = (method: string, namespace: string[], data: unknown, seq = 1): ProtocolEvent => ({
    type: "event",
    event_id: String(seq),
    seq,
    method,
    params: { namespace, timestamp: 0, data },
  });
  t.ok(matchesFilter({ channels: ["values"] }, ev("values", [], {})));
  t.notOk(matchesFilter({ channels: ["updates"] }, ev("values", [], {})));
  t.ok(matchesFilter({ channels: ["input"] }, ev("input.requested", [], {})));
  t.ok(matchesFilter({ channels: ["custom"] }, ev("custom", [], { name: "a", payload: 1 })), "custom covers custom:<name>");
  t.ok(matchesFilter({ channels: ["custom:a"] }, ev("custom", [], { name: "a", payload: 1 })));
  t.notOk(matchesFilter({ channels: ["custom:b"] }, ev("custom", [], { name: "a", payload: 1 })));
  t.ok(matchesFilter({ channels: ["values"], namespaces: [["child"]] }, ev("values", ["child:1", "x:2"], {})), "prefix match without the dynamic suffix");
  t.notOk(matchesFilter({ channels: ["values"], namespaces: [["child"]], depth: 0 }, ev("values", ["child:1", "x:2"], {})), "deeper than depth");
  t.notOk(matchesFilter({ channels: ["values"], since: 5 }, ev("values", [], {}, 5)));
  t.ok(matchesFilter({ channels: ["values"], since: 5 }, ev("values", [], {}, 6)));
});

t.test("subgraph lifecycle: started on first sight, completed after the parent's update of its node, the run's status at its end", async (t) => {
  const state = newProtocolChunkState();
  const lifecycles = (records: { method: string; namespace: string[]; data: unknown }[]) =>
    records.filter((r) => r.method === "lifecycle").map((r) => [r.namespace.join("|"), (r.data as { event: string }).event]);
  t.same(lifecycles(protocolRecordsOf(state, ["child:1", "grandchild:2"], "values", { messages: [] })), [
    ["child:1", "started"],
    ["child:1|grandchild:2", "started"],
  ]);
  t.same(lifecycles(protocolRecordsOf(state, ["child:1"], "updates", { other: {} })), [], "another node's update ends nothing");
  const update = protocolRecordsOf(state, ["child:1"], "updates", { grandchild: { messages: [] } });
  t.same(
    update.map((r) => r.method),
    ["updates", "lifecycle"],
    "the parent's update first, then the subgraph's end",
  );
  t.same(lifecycles(update), [["child:1|grandchild:2", "completed"]]);
  t.same(update[1]!.data, { event: "completed", graph_name: "grandchild" });
  protocolRecordsOf(state, ["child:1", "grandchild:2"], "values", { messages: [] });
  t.same(lifecycles(protocolRecordsOf(state, ["child:1", "grandchild:2"], "values", {})), [], "a completed subgraph is not started again");
  t.same(lifecycles(protocolRecordsOf(state, [], "updates", { child: {} })), [["child:1", "completed"]]);
  t.same([...state.open.keys()], [], "nothing left open");

  // A run that ends with subgraphs open (an interrupt inside one) ends them with its status, deepest first, before the root.
  const run = newRunMapState("parent");
  for (const [position, namespace] of [
    [1, ["a:1"]],
    [2, ["a:1", "b:2"]],
  ] as const) {
    protocolEventsOf(
      run,
      logEvent(position, "RunOutput", {
        event: "protocol",
        data: { method: "lifecycle", namespace, data: { event: "started", graph_name: namespace.at(-1)!.split(":")[0] } },
      }),
    );
  }
  const end = protocolEventsOf(run, logEvent(3, "RunEnded", { status: "interrupted", ended_at: "" }));
  t.same(
    end.map((e) => [e.params.namespace.join("|"), e.params.data]),
    [
      ["a:1|b:2", { event: "interrupted", graph_name: "b" }],
      ["a:1", { event: "interrupted", graph_name: "a" }],
      ["", { event: "interrupted", graph_name: "parent" }],
    ],
  );
});
