import t from "tap";
import {
  assistantEventSchemas,
  decideCreateAssistant,
  decideDeleteAssistant,
  decidePatchAssistant,
  decideSetLatestVersion,
  evolveAssistant,
  type AssistantEvent,
  type AssistantState,
  type CreateAssistant,
} from "../../src/domain/assistants.js";
import type { Decision } from "../../src/domain/decision.js";

/** The assistant aggregate without I/O: deciders produce events, the fold turns them into state. */

const ID = "2b9f9c3e-7a4d-4a8f-9c1e-000000000001";
const create: CreateAssistant = {
  assistant_id: ID,
  graph_id: "agent",
  config: { configurable: { a: 1 } },
  context: {},
  metadata: { team: "x" },
  name: "n",
  description: null,
  if_exists: "raise",
};

/** Applies a decision's events to a state, checking each against its schema as the store would. */
function apply(state: AssistantState | undefined, decision: Decision): AssistantState {
  if (!decision.ok) throw new Error(decision.detail);
  let s = state;
  for (const e of decision.events) {
    const schema = assistantEventSchemas[e.type as keyof typeof assistantEventSchemas];
    t.ok(schema.safeParse(e.data).success, `${e.type} satisfies its schema`);
    s = evolveAssistant(s, e as AssistantEvent, (s?.revision ?? -1n) + 1n);
  }
  return s!;
}

t.test("create → version 1 with the given fields; raise vs do_nothing on an existing one", async (t) => {
  const s = apply(undefined, decideCreateAssistant(undefined, create, "T1"));
  t.equal(s.revision, 0n);
  t.same(s.current, {
    assistant_id: ID,
    graph_id: "agent",
    config: { configurable: { a: 1 } },
    context: {},
    metadata: { team: "x" },
    name: "n",
    description: null,
    version: 1,
    created_at: "T1",
    updated_at: "T1",
  });
  t.same(decideCreateAssistant(s, create, "T2"), { ok: false, kind: "conflict", detail: "Assistant already exists" });
  t.same(decideCreateAssistant(s, { ...create, if_exists: "do_nothing" }, "T2"), { ok: true, events: [] });
});

t.test("patch appends a whole new version; metadata merged, other fields replaced only when given", async (t) => {
  let s = apply(undefined, decideCreateAssistant(undefined, create, "T1"));
  s = apply(s, decidePatchAssistant(s, { metadata: { extra: true }, name: "m" }, "T2"));
  t.equal(s.current.version, 2);
  t.same(s.current.metadata, { team: "x", extra: true });
  t.equal(s.current.name, "m");
  t.same(s.current.config, create.config);
  t.equal(s.current.created_at, "T1");
  t.equal(s.current.updated_at, "T2");
  s = apply(s, decidePatchAssistant(s, {}, "T3"));
  t.equal(s.current.version, 3, "an empty patch still makes a version");
  t.equal(s.versions.length, 3);
});

t.test("set latest restores an older version's configuration; unknown version → 404", async (t) => {
  let s = apply(undefined, decideCreateAssistant(undefined, create, "T1"));
  s = apply(s, decidePatchAssistant(s, { config: { configurable: { a: 2 } } }, "T2"));
  s = apply(s, decideSetLatestVersion(s, 1, "T3"));
  t.equal(s.current.version, 1);
  t.same(s.current.config, { configurable: { a: 1 } });
  t.equal(s.current.updated_at, "T3");
  t.same(decideSetLatestVersion(s, 7, "T4"), { ok: false, kind: "not_found", detail: "Assistant version not found" });
  s = apply(s, decidePatchAssistant(s, {}, "T5"));
  t.equal(s.current.version, 3, "the next version number follows the highest, not the current");
});

t.test("delete leaves a tombstone that refuses further commands and allows re-creation", async (t) => {
  let s = apply(undefined, decideCreateAssistant(undefined, create, "T1"));
  s = apply(s, decideDeleteAssistant(s, "T2"));
  t.equal(s.deleted, true);
  t.equal(s.revision, 1n, "the tombstone keeps the stream revision for the next expected-revision check");
  t.same(decideDeleteAssistant(s, "T3"), { ok: false, kind: "not_found", detail: "Assistant not found" });
  t.same(decidePatchAssistant(s, {}, "T3"), { ok: false, kind: "not_found", detail: "Assistant not found" });
  s = apply(s, decideCreateAssistant(s, create, "T4"));
  t.equal(s.deleted, false);
  t.equal(s.revision, 2n);
});

t.test("folding the same events twice gives the same state (replay is deterministic)", async (t) => {
  const events: AssistantEvent[] = [];
  let s = apply(undefined, decideCreateAssistant(undefined, create, "T1"));
  const d = decidePatchAssistant(s, { metadata: { k: 1 } }, "T2");
  s = apply(s, d);
  for (const decision of [decideCreateAssistant(undefined, create, "T1"), d]) if (decision.ok) events.push(...(decision.events as AssistantEvent[]));
  const replay = () => events.reduce<AssistantState | undefined>((acc, e, i) => evolveAssistant(acc, e, BigInt(i)), undefined);
  t.same(replay(), replay());
  t.same(replay(), s);
});
