/**
 * Removes crons from the log for good, as part of a larger purge: the purge of a thread takes the crons bound to it
 * (src/app/audit.ts), the erasure of a user the crons they own (src/app/erase.ts); deleted ones too, since a deleted
 * cron's payload (the input, config and context of every run it started) is still in the log. A live cron is deleted
 * first (CronDeleted: the read model drops it, and a store that deletes softly folds it away again on a rebuild,
 * as a purged store item is); then its stream is purged (the encrypting store destroys its data keys first).
 */
import type { AppContext } from "./context.js";
import { cronStream } from "../domain/crons.js";
import { appendCronDeletion } from "./crons.js";
import { isNotFound } from "../domain/errors.js";
import { PURGED_EVENT_TYPE } from "../eventstore/types.js";

/** Purges each cron's stream that still has content; returns how many it purged (0 for crons purged before). */
export async function purgeCrons(ctx: AppContext, cronIds: readonly string[]): Promise<number> {
  let purged = 0;
  for (const id of cronIds) {
    const stream = cronStream(id);
    await ctx.commands.catchUpWithStream(stream);
    if (ctx.readModels.crons.get(id)) {
      try {
        await appendCronDeletion(ctx, id, ctx.now());
      } catch (error) {
        // Deleted meanwhile by someone else: the purge goes on.
        if (!isNotFound(error)) throw error;
      }
    }
    // A stream purged before reads as missing (EventStoreDB) or as tombstones (SQLite).
    const events = await ctx.store.readStream(stream);
    if (!events.some((e) => e.type !== PURGED_EVENT_TYPE)) continue;
    await ctx.store.purgeStreams([stream]);
    purged++;
  }
  return purged;
}
