import t from "tap";
import { isEvent, isEventOf, type EventDataOf, type EventType } from "../../src/domain/event-of.js";
import { schemaForEventType } from "../../src/domain/events.js";
import type { RecordedEvent } from "../../src/eventstore/types.js";

const recorded = (type: string, data: unknown): RecordedEvent => ({
  streamId: "run-r1",
  id: "e1",
  type,
  revision: 0n,
  position: 1n,
  data,
  metadata: {},
  created: new Date(0),
});

const ended: EventDataOf<"RunEnded"> = { status: "success", ended_at: "2026-01-01T00:00:00Z" };

t.test("isEvent narrows an event's data to its type's catalogue data", async (t) => {
  const event = recorded("RunEnded", ended);
  // @ts-expect-error without the guard the data is unknown
  t.equal(event.data.status, "success");
  if (!isEvent(event, "RunEnded")) throw new Error("a RunEnded event is a RunEnded event");
  // Compile-time checks: typed assignments from the narrowed data (and the rest of the event kept).
  const status: EventDataOf<"RunEnded">["status"] = event.data.status;
  const endedAt: string = event.data.ended_at;
  const revision: bigint = event.revision;
  const typed: "RunEnded" = event.type;
  t.same([status, endedAt, revision, typed], ["success", ended.ended_at, 0n, "RunEnded"]);
});

t.test("isEvent is false for any other type, and takes only catalogue types", async (t) => {
  const event = recorded("RunClaimed", { owner: "w", attempt: 1, claimed_at: "x", lease_expires_at: 0 });
  t.notOk(isEvent(event, "RunEnded"));
  t.notOk(isEvent(event, "RunOutput"));
  t.ok(isEvent(event, "RunClaimed"));
  t.notOk(isEvent({ type: "EventPurged", data: { purged_type: "RunEnded" } }, "RunEnded"), "a tombstone is not the event it replaced");
  // @ts-expect-error a type the catalogue does not hold is refused at compile time
  t.notOk(isEvent(event, "NoSuchEvent"));
});

t.test("isEvent only compares the type: it never parses the data", async (t) => {
  // Data its schema would refuse: the guard trusts the log (events are checked when appended).
  const event = recorded("RunEnded", { status: 42 });
  t.ok(isEvent(event, "RunEnded"));
  t.notOk(schemaForEventType("RunEnded")!.safeParse(event.data).success);
});

t.test("isEventOf narrows to the union of several types", async (t) => {
  const ENDS = ["RunFinished", "RunDeleted"] as const;
  const finished = { type: "RunFinished", data: { run_id: "r1", status: "success" } as unknown };
  const enqueued = { type: "RunEnqueued", data: {} as unknown };
  t.notOk(isEventOf(enqueued, ENDS));
  if (!isEventOf(finished, ENDS)) throw new Error("a RunFinished event is one of RunFinished, RunDeleted");
  const runId: string = finished.data.run_id; // both types' data have a run_id
  t.equal(runId, "r1");
  if (finished.type === "RunFinished") {
    const status: EventDataOf<"RunFinished">["status"] = finished.data.status; // the type then narrows further
    t.equal(status, "success");
  }
  // @ts-expect-error a list with a type the catalogue does not hold is refused at compile time
  t.notOk(isEventOf(enqueued, ["RunDeleted", "NoSuchEvent"]));
});

t.test("every type a fold names is in the catalogue", async (t) => {
  const types: EventType[] = [
    "RunEnqueued",
    "RunFinished",
    "RunClaimed",
    "RunOutput",
    "RunEnded",
    "ThreadPurged",
    "CheckpointsSnapshot",
    "LargeJsonChunk",
    "WebhookAttempted",
    "A2APushConfigSet",
    "StoreItemPut",
  ];
  for (const type of types) t.ok(schemaForEventType(type), `${type} has a schema`);
});
