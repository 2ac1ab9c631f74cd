import { Cron } from "croner";

/**
 * Cron schedules: 5-field cron syntax (minute hour day-of-month month day-of-week) in an IANA
 * time zone, evaluated by croner (DST-aware: a local time skipped by a spring-forward fires at
 * the first valid minute after it, a repeated local time fires once). Pure: every function
 * takes the instant it computes from.
 */

export type ScheduleCheck = { ok: true } | { ok: false; field: "schedule" | "timezone"; detail: string };

export function isValidTimezone(timezone: string): boolean {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: timezone });
    return true;
  } catch {
    return false;
  }
}

function cronOf(schedule: string, timezone: string): Cron {
  // `paused`: evaluation only, croner must not start a timer of its own.
  return new Cron(schedule, { timezone, paused: true, mode: "5-part" });
}

export function checkSchedule(schedule: string, timezone: string): ScheduleCheck {
  const fields = schedule.trim().split(/\s+/);
  if (fields.length !== 5 || fields[0] === "") {
    return {
      ok: false,
      field: "schedule",
      detail: `schedule: expected 5 fields (minute hour day-of-month month day-of-week), got ${fields[0] === "" ? 0 : fields.length}`,
    };
  }
  if (!isValidTimezone(timezone)) return { ok: false, field: "timezone", detail: `timezone: unknown IANA time zone '${timezone}'` };
  try {
    cronOf(schedule, timezone);
  } catch (error) {
    return { ok: false, field: "schedule", detail: `schedule: ${(error as Error).message}` };
  }
  return { ok: true };
}

/** The first tick strictly after `afterMs` (ms since epoch), or null when there is none. */
export function nextTick(schedule: string, timezone: string, afterMs: number): number | null {
  const next = cronOf(schedule, timezone).nextRun(new Date(afterMs));
  return next ? next.getTime() : null;
}

/**
 * The ticks to fire at `nowMs` after the last fired one: every tick in (after, now], reduced by
 * the catch-up window (null = only the latest missed tick; otherwise every tick within the last
 * `catchUpMs`, in order), never past `endMs`. At most `limit` ticks are examined.
 */
export function dueTicks(
  schedule: string,
  timezone: string,
  afterMs: number,
  nowMs: number,
  opts: { catchUpMs: number | null; endMs?: number | null; limit?: number } = { catchUpMs: null },
): number[] {
  const cron = cronOf(schedule, timezone);
  const horizon = Math.min(nowMs, opts.endMs ?? Infinity);
  if (horizon <= afterMs) return [];
  if (opts.catchUpMs === null) {
    // Only the latest tick matters: ask for it directly instead of walking every missed one.
    // Ticks fall on whole minutes; croner compares at second resolution, so look from one second later.
    const latest = cron.previousRuns(1, new Date(horizon + 1000))[0]?.getTime();
    return latest !== undefined && latest > afterMs && latest <= horizon ? [latest] : [];
  }
  const ticks: number[] = [];
  let cursor = Math.max(afterMs, nowMs - opts.catchUpMs - 1);
  for (let i = 0; i < (opts.limit ?? 10_000); i++) {
    const t = cron.nextRun(new Date(cursor))?.getTime();
    if (t === undefined || t > horizon) break;
    ticks.push(t);
    cursor = t;
  }
  return ticks;
}
