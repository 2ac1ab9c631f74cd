/** The wire forms of LogHealth: the `/ok` answer and the `log` part of `/info`. */
import * as z from "zod";
import { subscriptionLag, type LogHealth } from "../eventstore/log-health.js";

export const LogReportSchema = z.object({
  connection: z.enum(["connected", "disconnected"]),
  since: z.string(),
  reconnects: z.number().int(),
  last_error: z.string().optional(),
  subscriptions: z.array(
    z.object({
      name: z.string(),
      state: z.enum(["catching_up", "live", "reconnecting", "stopped"]),
      position: z.string().optional(),
      /** Positions behind the log's head; absent when the head could not be read. */
      lag: z.string().optional(),
      resubscribes: z.number().int(),
    }),
  ),
  /** Open subscriptions without a name (SSE tails). */
  other_subscriptions: z.number().int(),
  stopped: z.array(z.object({ name: z.string(), reason: z.string() })),
});

export type LogReport = z.infer<typeof LogReportSchema>;

export function healthReport(health: LogHealth, head: bigint | undefined): LogReport {
  const s = health.snapshot();
  return {
    connection: s.connection,
    since: s.since.toISOString(),
    reconnects: s.reconnects,
    ...(s.lastError ? { last_error: s.lastError } : {}),
    subscriptions: s.subscriptions.map((x) => ({
      name: x.name,
      state: x.state,
      ...(x.position === undefined ? {} : { position: String(x.position) }),
      ...(head === undefined ? {} : { lag: String(subscriptionLag(x, head)) }),
      resubscribes: x.resubscribes,
    })),
    other_subscriptions: s.unnamedSubscriptions,
    stopped: s.stoppedConsumers,
  };
}

/** `check_db` as the official server reads it: anything but absent, "", "0" or "false" asks for a round trip. */
export function wantsLogCheck(checkDb: string | undefined): boolean {
  return checkDb !== undefined && !["", "0", "false"].includes(checkDb.trim().toLowerCase());
}

/**
 * What `/ok` says of the quarantine (see read-models/quarantine.ts) when it holds anything: counts
 * only, as /ok is public; the records are listed by `GET /audit/quarantine`.
 */
export const QuarantineReportSchema = z.object({
  entries: z.number().int(),
  by_subscriber: z.record(z.string(), z.number().int()),
  list: z.string(),
});

export type QuarantineReport = z.infer<typeof QuarantineReportSchema>;

/** The /ok part of a quarantine summary; undefined when it is empty (then /ok answers as before). */
export function quarantineReport(summary: { entries: number; by_subscriber: Record<string, number> } | undefined): QuarantineReport | undefined {
  if (!summary || summary.entries === 0) return undefined;
  return { entries: summary.entries, by_subscriber: summary.by_subscriber, list: "/audit/quarantine" };
}

/**
 * `/ok`: ok unless the process cannot serve writes (the log unreachable, a read model or a
 * subscription stopped or reconnecting); with `check_db`, only ok once a round trip to the log succeeded.
 * Quarantined events do not make it not ok (everything else is served), but are reported beside the verdict.
 */
export async function okAnswer(
  health: LogHealth | undefined,
  checkDb: string | undefined,
  checkLog: (() => Promise<unknown>) | undefined,
  quarantine?: () => QuarantineReport | undefined,
): Promise<{ ok: boolean; reason?: string; quarantine?: QuarantineReport }> {
  const report = quarantine?.();
  const detail = report ? { quarantine: report } : {};
  const verdict = health?.verdict() ?? { ok: true };
  if (!verdict.ok) return { ok: false, reason: verdict.reason, ...detail };
  if (wantsLogCheck(checkDb) && checkLog) {
    try {
      await checkLog();
    } catch (error) {
      return { ok: false, reason: `event log round trip failed: ${(error as Error).message}`, ...detail };
    }
  }
  return { ok: true, ...detail };
}
