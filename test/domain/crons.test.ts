import t from "tap";
import Database from "better-sqlite3";
import { checkSchedule, dueTicks, nextTick } from "../../src/domain/cron-schedule.js";
import {
  CronPayloadSchema,
  decideDeleteCron,
  decideFire,
  decideUpdateCron,
  evolveCron,
  nextRunOf,
  publicCron,
  type CronEvent,
  type CronState,
} from "../../src/domain/crons.js";
import { runRequestOf } from "../../src/app/crons.js";
import { StatelessRunRequestSchema } from "../../src/domain/run-request.js";
import { cronsTable, CronsReadModel } from "../../src/read-models/crons.js";
import type { RecordedEvent } from "../../src/eventstore/types.js";
import { schemaForEventType } from "../../src/domain/events.js";

/** Cron schedules, the cron aggregate and its table: tick sequences, time zones, DST, catch-up, exactly-once decisions. */

const iso = (ms: number) => new Date(ms).toISOString();
const at = (s: string) => Date.parse(s);
/** The next `n` ticks after `from`, as a fake clock stepping from tick to tick sees them. */
function ticks(schedule: string, tz: string, from: string, n: number): string[] {
  const out: string[] = [];
  let cursor = at(from);
  for (let i = 0; i < n; i++) {
    const next = nextTick(schedule, tz, cursor);
    if (next === null) break;
    out.push(iso(next));
    cursor = next;
  }
  return out;
}

t.test("validation: 5 fields, known time zone, croner's field errors", async (t) => {
  t.same(checkSchedule("*/5 * * * *", "UTC"), { ok: true });
  t.same(checkSchedule("0 9 * * 1-5", "Europe/Berlin"), { ok: true });
  t.match(checkSchedule("* * * *", "UTC"), { ok: false, field: "schedule", detail: /^schedule: expected 5 fields/ });
  t.match(checkSchedule("0 * * * * *", "UTC"), { ok: false, field: "schedule", detail: /got 6/ });
  t.match(checkSchedule("61 * * * *", "UTC"), { ok: false, field: "schedule", detail: /^schedule: .*minute/ });
  t.match(checkSchedule("* * * * *", "Mars/Olympus"), { ok: false, field: "timezone", detail: /^timezone: unknown IANA time zone 'Mars\/Olympus'$/ });
});

t.test("tick sequences: UTC, a time zone, and both DST changes", async (t) => {
  t.same(ticks("*/15 * * * *", "UTC", "2026-01-01T00:07:00Z", 3), ["2026-01-01T00:15:00.000Z", "2026-01-01T00:30:00.000Z", "2026-01-01T00:45:00.000Z"]);
  t.same(
    ticks("0 9 * * *", "Asia/Tokyo", "2026-01-01T00:00:00Z", 2),
    ["2026-01-02T00:00:00.000Z", "2026-01-03T00:00:00.000Z"],
    "09:00 in Tokyo is 00:00 UTC (strictly after the start)",
  );
  // Berlin springs forward on 2026-03-29 at 02:00 → 03:00: 02:30 does not exist that day.
  t.same(
    ticks("30 2 * * *", "Europe/Berlin", "2026-03-27T12:00:00Z", 3),
    ["2026-03-28T01:30:00.000Z", "2026-03-29T01:00:00.000Z", "2026-03-30T00:30:00.000Z"],
    "the skipped time fires at the first valid instant",
  );
  // New York falls back on 2026-11-01 at 02:00 → 01:00: 01:30 happens twice; fired once.
  t.same(
    ticks("30 1 * * *", "America/New_York", "2026-10-31T00:00:00Z", 3),
    ["2026-10-31T05:30:00.000Z", "2026-11-01T05:30:00.000Z", "2026-11-02T06:30:00.000Z"],
    "the repeated hour fires once",
  );
  // Hourly across the fall-back: every real hour once, the offset changes in the middle.
  t.same(ticks("0 * * * *", "America/New_York", "2026-11-01T04:30:00Z", 3), [
    "2026-11-01T05:00:00.000Z",
    "2026-11-01T06:00:00.000Z",
    "2026-11-01T07:00:00.000Z",
  ]);
});

t.test("due ticks: the latest missed one by default, a catch-up window, end time", async (t) => {
  const start = at("2026-01-01T00:00:00Z");
  const min = 60_000;
  t.same(dueTicks("*/5 * * * *", "UTC", start, start + 4 * min, { catchUpMs: null }), [], "nothing due yet");
  t.same(dueTicks("*/5 * * * *", "UTC", start, start + 5 * min, { catchUpMs: null }).map(iso), ["2026-01-01T00:05:00.000Z"], "due exactly on the tick");
  t.same(dueTicks("*/5 * * * *", "UTC", start, start + 23 * min, { catchUpMs: null }).map(iso), ["2026-01-01T00:20:00.000Z"], "missed ticks: only the latest");
  t.same(
    dueTicks("*/5 * * * *", "UTC", start, start + 23 * min, { catchUpMs: 10 * min }).map(iso),
    ["2026-01-01T00:15:00.000Z", "2026-01-01T00:20:00.000Z"],
    "window: every tick within it, in order",
  );
  t.same(
    dueTicks("*/5 * * * *", "UTC", start, start + 23 * min, { catchUpMs: null, endMs: start + 12 * min }).map(iso),
    ["2026-01-01T00:10:00.000Z"],
    "never past end_time",
  );
  t.same(dueTicks("* * * * *", "UTC", start, start + 400 * 86_400_000, { catchUpMs: null }).length, 1, "a year of missed minutes costs one lookup");
});

const NOW = "2026-01-01T00:00:00+00:00";
const created = {
  cron_id: "c1",
  assistant_id: "a1",
  thread_id: null,
  schedule: "*/5 * * * *",
  timezone: "UTC",
  end_time: null,
  enabled: true,
  on_run_completed: "delete" as const,
  metadata: {},
  user_id: null,
  payload: { input: { x: 1 } },
  created_at: NOW,
};
const fold = (events: { type: string; data: unknown }[]) =>
  events.reduce<CronState | undefined>((s, e, i) => evolveCron(s, e as CronEvent, BigInt(i)), undefined);

t.test("cron aggregate: each tick fired once, disabled, end time, reschedule, delete", async (t) => {
  t.ok(schemaForEventType("CronCreated")!.safeParse(created).success);
  let s = fold([{ type: "CronCreated", data: created }])!;
  t.equal(iso(nextRunOf(s)!), "2026-01-01T00:05:00.000Z");
  t.match(publicCron(s), {
    cron_id: "c1",
    next_run_date: "2026-01-01T00:05:00.000+00:00",
    payload: { input: { x: 1 } },
    enabled: true,
    thread_id: null,
    user_id: null,
  });
  const tick = at("2026-01-01T00:05:00Z");
  const fire = decideFire(s, tick, { owner: "p1", now: NOW });
  t.match(fire, { ok: true, events: [{ type: "CronFired", data: { tick: "2026-01-01T00:05:00.000+00:00", owner: "p1" } }] });
  if (!fire.ok) return;
  s = evolveCron(s, fire.events[0] as CronEvent, 1n)!;
  t.match(decideFire(s, tick, { owner: "p2", now: NOW }), { ok: false, kind: "conflict", detail: "tick already fired" }, "never twice");
  t.equal(iso(nextRunOf(s)!), "2026-01-01T00:10:00.000Z");
  const disable = decideUpdateCron(s, { enabled: false }, "2026-01-01T00:06:00+00:00");
  if (!disable.ok) throw new Error("update refused");
  s = evolveCron(s, disable.events[0] as CronEvent, 2n)!;
  t.equal(nextRunOf(s), null, "disabled: no next run");
  t.match(decideFire(s, at("2026-01-01T00:10:00Z"), { owner: "p1", now: NOW }), { ok: false, kind: "conflict", detail: "cron disabled" });
  // Re-enabled at 00:31: ticks missed while disabled are not fired; the next is 00:35.
  s = evolveCron(s, { type: "CronUpdated", data: { enabled: true, updated_at: "2026-01-01T00:31:00+00:00" } }, 3n)!;
  t.equal(iso(nextRunOf(s)!), "2026-01-01T00:35:00.000Z");
  s = evolveCron(
    s,
    { type: "CronUpdated", data: { schedule: "0 * * * *", end_time: "2026-01-01T00:50:00+00:00", updated_at: "2026-01-01T00:32:00+00:00" } },
    4n,
  )!;
  t.equal(nextRunOf(s), null, "next hourly tick (01:00) is past end_time");
  t.match(decideFire(s, at("2026-01-01T01:00:00Z"), { owner: "p1", now: NOW }), { ok: false, kind: "conflict", detail: "past end_time" });
  t.match(decideDeleteCron(s, NOW), { ok: true, events: [{ type: "CronDeleted" }] });
  t.equal(evolveCron(s, { type: "CronDeleted", data: { deleted_at: NOW } }, 5n), undefined);
  t.match(decideDeleteCron(undefined, NOW), { ok: false, kind: "not_found", detail: "Cron not found" });
  t.match(decideUpdateCron(undefined, {}, NOW), { ok: false, kind: "not_found" });
  t.match(decideFire(undefined, tick, { owner: "p1", now: NOW }), { ok: false, kind: "not_found", detail: "cron deleted" });
});

t.test("crons table: rows, next_run_at index, search, count, delete", async (t) => {
  const db = new Database(":memory:");
  for (const ddl of cronsTable.ddl) db.exec(ddl);
  const apply = cronsTable.prepare(db) as (event: RecordedEvent) => void;
  const model = new CronsReadModel(db);
  let position = 0n;
  const ev = (id: string, type: string, data: unknown, revision: bigint): RecordedEvent => ({
    streamId: `cron-${id}`,
    id: String(position),
    type,
    revision,
    position: position++,
    data,
    metadata: {},
    created: new Date(0),
  });
  apply(ev("c1", "CronCreated", created, 0n));
  apply(
    ev(
      "c2",
      "CronCreated",
      {
        ...created,
        cron_id: "c2",
        assistant_id: "a2",
        thread_id: "t1",
        on_run_completed: null,
        schedule: "0 * * * *",
        created_at: "2026-01-01T00:01:00+00:00",
      },
      0n,
    ),
  );
  apply(ev("c3", "CronCreated", { ...created, cron_id: "c3", enabled: false, created_at: "2026-01-01T00:02:00+00:00" }, 0n));
  t.equal(model.nextDue(), at("2026-01-01T00:05:00Z"));
  t.same(model.due(at("2026-01-01T00:04:59Z"), 10), []);
  t.same(
    model.due(at("2026-01-01T00:05:00Z"), 10).map((c) => c.cron_id),
    ["c1"],
  );
  apply(ev("c1", "CronFired", { tick: "2026-01-01T00:05:00.000+00:00", owner: "p", fired_at: NOW }, 1n));
  t.match(model.get("c1"), { last_tick_ms: at("2026-01-01T00:05:00Z"), revision: 1n });
  t.same(model.due(at("2026-01-01T00:05:00Z"), 10), [], "fired: no longer due");
  t.equal(model.count({}), 3);
  t.equal(model.count({ enabled: false }), 1);
  t.equal(model.count({ thread_id: "t1" }), 1);
  const { page, total } = model.search({ assistant_id: "a1", sort_by: "created_at", sort_order: "asc", limit: 1, offset: 1 });
  t.equal(total, 2);
  t.same(
    page.map((c) => c.cron_id),
    ["c3"],
  );
  t.same(
    model.search({ sort_by: "next_run_date", sort_order: "asc", limit: 10, offset: 0 }).page.map((c) => c.cron_id),
    ["c3", "c1", "c2"],
    "null next_run_date sorts first ascending",
  );
  apply(ev("c1", "CronDeleted", { deleted_at: NOW }, 2n));
  t.equal(model.get("c1"), undefined);
  t.equal(model.count({}), 2);
  db.close();
});

t.test("a tick's run request: the payload picked from the run request, unknown stream modes left out", async (t) => {
  const payload = {
    input: { x: 1 },
    config: { tags: ["nightly"], configurable: { k: "v" } },
    metadata: { m: 1 },
    webhook: "https://example.test/hook",
    multitask_strategy: "reject" as const,
    interrupt_before: "*" as const,
    stream_mode: ["updates", "no-such-mode"],
    stream_subgraphs: true,
    durability: "sync" as const,
  };
  t.ok(CronPayloadSchema.safeParse(payload).success, "any stream mode name is read back from the log");
  t.notOk(CronPayloadSchema.safeParse({ ...payload, durability: "eventually" }).success, "other fields validated as a run request's");
  const stateless = fold([{ type: "CronCreated", data: { ...created, payload } }])!;
  const request = runRequestOf(stateless);
  t.match(request, {
    assistant_id: "a1",
    input: { x: 1 },
    config: { tags: ["nightly"] },
    metadata: { m: 1 },
    webhook: "https://example.test/hook",
    multitask_strategy: "reject",
    interrupt_before: "*",
    stream_subgraphs: true,
    on_completion: "delete",
  });
  t.same(request.stream_mode, ["updates"]);
  t.ok(StatelessRunRequestSchema.safeParse(request).success, "a valid run request");
  const onThread = runRequestOf({ ...stateless, thread_id: "t1", on_run_completed: null, payload: { input: null } });
  t.same(onThread, { input: null, assistant_id: "a1" }, "a thread's cron: no on_completion, no stream mode named");
  t.equal(runRequestOf({ ...stateless, on_run_completed: "keep" }).on_completion, "keep");
});
