/**
 * Expires store items: one timer, set to the earliest expiry the read model holds (never a
 * polling loop). When it fires, every item whose time has come gets a StoreItemExpired appended
 * with the revision the read model saw, so a put or refresh that landed meanwhile wins (and, with
 * several processes on one EventStoreDB, exactly one of them expires an item). Reads hide expired
 * items already; the sweep makes the expiry part of the log.
 */
import type { EventStore, RecordedEvent } from "../eventstore/types.js";
import { CommandPipeline } from "../commands/pipeline.js";
import type { ReadModels } from "../read-models/all.js";
import { decideExpire, storeItemStream } from "../domain/store.js";
import { isEvent } from "../domain/event-of.js";
import type { Clock } from "../context/clock.js";
import { WakeLoop } from "../context/wake-loop.js";

/** Items expired per read of the read model. */
const SWEEP_PAGE = 100;

export interface StoreSweeperOptions {
  store: EventStore;
  readModels: ReadModels;
  clock: Clock;
  log?: (message: string) => void;
}

export class StoreSweeper {
  private readonly loop: WakeLoop;
  private unsubscribe: (() => void) | undefined;

  private readonly commands: CommandPipeline;

  constructor(private readonly o: StoreSweeperOptions) {
    this.commands = new CommandPipeline(o.store, o.readModels.runner);
    this.loop = new WakeLoop({
      clock: o.clock,
      pass: () => this.sweepDue(),
      onError: (error) => o.log?.(`store TTL sweep failed: ${(error as Error).stack ?? String(error)}`),
    });
  }

  start(): void {
    // A new or refreshed expiry earlier than the armed one moves the timer forward.
    this.unsubscribe = this.o.readModels.runner.onApplied((event: RecordedEvent) => {
      if (!isEvent(event, "StoreItemPut") && !isEvent(event, "StoreItemTtlRefreshed")) return;
      const at = event.data.expires_at;
      if (at !== null) this.loop.dueAt(at);
    });
    void this.loop.run();
  }

  /** Expires everything due now; resolves when done (and the timer is set again). */
  sweep(): Promise<void> {
    return this.loop.run();
  }

  async stop(): Promise<void> {
    this.unsubscribe?.();
    await this.loop.stop();
  }

  /** Expires the items due now; says when the next one is. */
  private async sweepDue(): Promise<number | undefined> {
    for (;;) {
      const now = this.o.clock.now();
      const due = this.o.readModels.storeItems.expired(now, SWEEP_PAGE);
      let last: bigint | undefined;
      let progress = 0;
      for (const item of due) {
        const stream = storeItemStream(item.namespace, item.key);
        // Changed meanwhile (put, refresh, or another process expired it): the read model will say.
        const expired = await this.commands.append({ stream, events: decideExpire(item, now), expected: item.revision, onConflict: "lose" });
        if (expired) last = expired.position;
        else await this.commands.catchUpWithStream(stream);
        progress++;
      }
      if (last !== undefined) await this.o.readModels.runner.waitFor(last);
      if (due.length < SWEEP_PAGE || progress === 0) break;
    }
    return this.o.readModels.storeItems.nextExpiry();
  }
}
