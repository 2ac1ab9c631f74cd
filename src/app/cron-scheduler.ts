import { ulid } from "ulid";
import type { EventStore } from "../eventstore/types.js";
import { CommandPipeline } from "../commands/pipeline.js";
import { CRON_STREAM_PREFIX, cronCursor, cronStream, decideFire, isoOf, tickToComplete, type CronState } from "../domain/crons.js";
import { dueTicks } from "../domain/cron-schedule.js";
import type { ReadModels } from "../read-models/all.js";
import type { Clock } from "../context/clock.js";
import { WakeLoop } from "../context/wake-loop.js";
import { isPoison } from "../read-models/quarantine.js";

/** The subscriber name of the scheduler's quarantine records. */
export const CRONS_SUBSCRIBER = "crons";

export interface CronSchedulerOptions {
  store: EventStore;
  readModels: ReadModels;
  /** Starts the run of one tick through the normal run pipeline. */
  startRun(cron: CronState, tickMs: number): Promise<{ run_id: string; thread_id: string }>;
  clock: Clock;
  /** Missed ticks fired on start: null = only the latest; otherwise those within this many ms. */
  catchUpMs: number | null;
  owner?: string;
  log?: (message: string) => void;
}

/** A cron still due after its fire found nothing to do is looked at again this much later (not in a spin). */
const STILL_DUE_MS = 1000;

/**
 * Fires each due cron tick exactly once across processes: the tick is claimed by appending
 * CronFired with the cron stream's expected revision (the loser gets WrongExpectedVersion and
 * moves on), then its run is created through RunsService (webhooks, streams and double-texting
 * apply) and recorded. It sleeps until the earliest `next_run_at` of the crons table and wakes
 * early when a cron event arrives; it never polls.
 *
 * A cron whose fire throws because of what the log holds for it (a schedule or payload its code
 * cannot read) is quarantined under `cron-{id}` and left out of the due crons from then on, instead
 * of being fired again in a loop.
 */
export class CronScheduler {
  readonly owner: string;
  /** Ticks this process fired, ticks another process had fired first (its claim won), and ticks a dead claimer left without their run, completed here. */
  readonly stats = { fired: 0, lost: 0, completed: 0 };
  private readonly loop: WakeLoop;
  private readonly inflight = new Set<string>();
  private readonly done = new Set<Promise<void>>();
  private unsubscribe: (() => void) | undefined;
  private stopping = false;
  private readonly commands: CommandPipeline;

  constructor(private readonly o: CronSchedulerOptions) {
    this.commands = new CommandPipeline(o.store, o.readModels.runner);
    this.owner = o.owner ?? `crons-${ulid()}`;
    this.loop = new WakeLoop({ clock: o.clock, pass: () => this.fireWhatIsDue(), onError: (error) => o.log?.(`crons: ${(error as Error).message}`) });
  }

  start(): void {
    this.unsubscribe = this.o.readModels.runner.onApplied((event) => {
      if (event.streamId.startsWith(CRON_STREAM_PREFIX)) this.loop.wake();
    }, CRONS_SUBSCRIBER);
    void this.loop.run();
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.unsubscribe?.();
    await this.loop.stop();
    await Promise.allSettled([...this.done]);
  }

  /** Resolves once every tick being fired now is recorded (tests await it after moving the clock). */
  async idle(): Promise<void> {
    while (this.done.size > 0 || this.loop.busy) {
      await this.loop.idle();
      await Promise.allSettled([...this.done]);
      await new Promise((r) => setImmediate(r));
    }
  }

  /** Looks again now (e.g. after a fake clock moved). */
  wake(): void {
    this.loop.wake();
  }

  /** Starts firing every due cron not being fired already; says when to look again. */
  private fireWhatIsDue(): number | undefined {
    if (this.stopping) return undefined;
    const model = this.o.readModels.crons;
    const now = this.o.clock.now();
    const quarantine = this.o.readModels.runner.quarantine;
    // Crons given up on are never due again (until a rebuild clears the quarantine).
    const excluded = quarantine.streams(CRONS_SUBSCRIBER, CRON_STREAM_PREFIX).map((s) => s.slice(CRON_STREAM_PREFIX.length));
    for (const cron of model.due(now, 100, excluded)) {
      if (this.inflight.has(cron.cron_id)) continue;
      this.inflight.add(cron.cron_id);
      const p = this.fireDue(cron, now)
        .catch((error: unknown) => {
          if (this.stopping) return;
          this.o.log?.(`cron ${cron.cron_id}: ${(error as Error).stack ?? String(error)}`);
          // Firing it again would fail the same way (and at once: a loop): it is left out from now on.
          if (isPoison(error)) quarantine.tryRecord(CRONS_SUBSCRIBER, { streamId: cronStream(cron.cron_id) }, error);
        })
        .finally(() => {
          this.inflight.delete(cron.cron_id);
          this.done.delete(p);
          this.loop.wake();
        });
      this.done.add(p);
    }
    const next = model.nextDue(excluded);
    if (next === undefined) return undefined;
    // A due cron being fired is looked at again on the event its fire appends.
    if (next <= now && this.inflight.size > 0) return undefined;
    return next <= now ? now + STILL_DUE_MS : next;
  }

  /** Creates one tick's run; the event that records it (created, or failed with why). */
  private async runOfTick(cron: CronState, tick: number): Promise<{ type: string; data: unknown }> {
    const tickIso = isoOf(tick);
    try {
      const run = await this.o.startRun(cron, tick);
      return { type: "CronRunCreated", data: { tick: tickIso, run_id: run.run_id, thread_id: run.thread_id } };
    } catch (error) {
      this.o.log?.(`cron ${cron.cron_id} tick ${tickIso}: ${(error as Error).message}`);
      return { type: "CronRunFailed", data: { tick: tickIso, error: (error as Error).message } };
    }
  }

  /** Fires the due ticks of one cron (the catch-up window decides which missed ones), in order. */
  private async fireDue(cron: CronState, now: number): Promise<void> {
    const ticks = dueTicks(cron.schedule, cron.timezone, cronCursor(cron), now, {
      catchUpMs: this.o.catchUpMs,
      endMs: cron.end_time ? Date.parse(cron.end_time) : null,
    });
    // A tick claimed by a process that died before recording its run: its run is created now (with
    // the claimer's idempotency key, so one run whoever creates it), recorded unless someone did.
    const orphan = tickToComplete(cron, now);
    if (orphan !== null) {
      const record = await this.runOfTick(cron, orphan);
      // Lost: someone recorded it first.
      const recorded = await this.commands.append({
        stream: cronStream(cron.cron_id),
        events: [record],
        expected: cron.revision,
        onConflict: "lose",
        waitFor: "fold",
      });
      if (recorded) this.stats.completed++;
      return; // the next pass fires what is due, from the recorded state
    }
    let state = cron;
    let position: bigint | undefined;
    for (const tick of ticks) {
      const decision = decideFire(state, tick, { owner: this.owner, now: isoOf(this.o.clock.now()) });
      if (!decision.ok) break;
      const fired = await this.commands.append({ stream: cronStream(cron.cron_id), events: decision.events, expected: state.revision, onConflict: "lose" });
      if (!fired) {
        this.stats.lost++;
        return; // another process fired it (or the cron changed)
      }
      const revision = fired.nextExpectedRevision;
      position = fired.position;
      this.stats.fired++;
      const record = await this.runOfTick(state, tick);
      const appended = await this.commands.append({ stream: cronStream(cron.cron_id), events: [record], expected: "any" });
      position = appended.position;
      // Another process appended between our claim and its record (it may have fired the next tick,
      // or the cron changed): the state we hold is stale, and claiming the next tick against the
      // stream's new revision would fire that tick twice. The next pass decides from the read model.
      if (appended.nextExpectedRevision !== revision + 1n) break;
      state = { ...state, revision: revision + 1n, last_tick_ms: tick };
    }
    if (position !== undefined) await this.o.readModels.runner.waitFor(position);
  }
}
