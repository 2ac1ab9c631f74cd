/**
 * The quarantine as auditors read it (see read-models/quarantine.ts): the stored events, and the
 * runs, deliveries and crons, that a subscriber of the log could not handle and skipped.
 */
import type { QuarantineEntry } from "../read-models/quarantine.js";
import type { AppContext } from "./context.js";
import { authorize, isRestricted, type Caller } from "./auth/caller.js";
import { AuthError } from "./auth/engine.js";

export interface QuarantinePage {
  entries: {
    subscriber: string;
    position: string | null;
    stream: string;
    revision: string | null;
    type: string | null;
    error: string;
    quarantined_at: string;
  }[];
  /** Pass as `before` for the next (older) page; null on the last page. */
  next: string | null;
}

/**
 * The records, newest first. They name streams of every tenant (no content): with custom auth, only a
 * caller whom the `threads:search` handler leaves unfiltered (an operator, not a user held to their
 * own threads) may read them.
 */
export async function quarantinePage(ctx: AppContext, caller: Caller, query: { limit: number; before?: bigint }): Promise<QuarantinePage> {
  if (isRestricted(caller)) {
    const { filters } = await authorize(caller, "threads", "search", {});
    if (filters) throw new AuthError(403, "Forbidden: the quarantine lists events of every tenant");
  }
  const { entries, cursor } = ctx.readModels.runner.quarantine.list(query);
  return { entries: entries.map(entryJson), next: cursor === undefined ? null : String(cursor) };
}

function entryJson(e: QuarantineEntry): QuarantinePage["entries"][number] {
  return {
    subscriber: e.subscriber,
    position: e.position === undefined ? null : String(e.position),
    stream: e.stream,
    revision: e.revision === undefined ? null : String(e.revision),
    type: e.type ?? null,
    error: e.error,
    quarantined_at: e.quarantined_at,
  };
}
