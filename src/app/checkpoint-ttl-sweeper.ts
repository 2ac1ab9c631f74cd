/**
 * `checkpointer.ttl` (langgraph.json): every `sweep_interval_minutes`, up to `sweep_limit` threads
 * whose checkpoints were last written more than `default_ttl` minutes ago are swept, as the official
 * server does: `delete` deletes the thread with its runs and checkpoints (as `DELETE /threads/{id}`:
 * ThreadDeleted, then CheckpointsDeleted), `keep_latest` keeps the thread and the latest checkpoint of
 * each namespace and discards the rest of its history (a CheckpointsDiscarded; the state is unchanged).
 *
 * Which threads: the checkpoint TTL read model (src/read-models/checkpoint-ttl.ts), an index of
 * live threads by their last run, state update or creation, less those swept since. Exactly once
 * across processes, each claim appended with the revision its decision was taken on and a conflict
 * lost (another process swept the thread, or it was active meanwhile):
 * - `delete`: the thread stream's revision the read model showed (a run enqueued since moves it);
 *   only the process whose ThreadDeleted was appended deletes the checkpoints.
 * - `keep_latest`: the checkpoint stream's revision its tail had when read. A sweep another process
 *   appended, not yet folded here, is in that tail after the thread's last activity: it is left.
 * The log is append-only: discarded and deleted checkpoints are gone from every read (state, history,
 * another process's) and from the snapshots written after the sweep; their content leaves the files
 * with the thread's purge (`DELETE /threads/{id}?purge=true`), which the log allows per thread.
 */
import type { AppContext } from "./context.js";
import { deleteThread } from "./threads.js";
import { isSweepEvent, type CheckpointTtlRow } from "../read-models/checkpoint-ttl.js";
import { checkpointStream } from "../domain/checkpoint-events.js";
import type { ThreadState } from "../domain/threads.js";
import type { CheckpointTtlStrategy } from "../langgraph-config.js";
import type { Clock } from "../context/clock.js";
import { WakeLoop } from "../context/wake-loop.js";
import { runInRequestContext } from "../context/request-context.js";
import { SYSTEM_ACTOR } from "../context/attribution.js";

const MINUTE_MS = 60_000;

/** What the sweeper asks of the checkpointer (EventSourcedCheckpointSaver). */
export interface CheckpointTtlCheckpointer {
  deleteThread(threadId: string): Promise<void>;
  keepLatestAt(threadId: string, expected: bigint | "no_stream"): Promise<{ discarded: number; position: bigint } | undefined>;
}

export interface CheckpointTtlSettings {
  strategy: CheckpointTtlStrategy;
  /** Minutes. */
  defaultTtl: number;
  sweepIntervalMinutes: number;
  sweepLimit: number;
}

export interface CheckpointTtlSweeperOptions extends CheckpointTtlSettings {
  /** The log, the read models and the commands. */
  ctx: AppContext;
  /** The checkpointer (the runtime's: asking may wait for the graph runtime to load). */
  checkpointer: () => Promise<CheckpointTtlCheckpointer>;
  clock: Clock;
  log?: (message: string) => void;
}

export interface CheckpointTtlStats {
  /** Threads this process swept (deleted, or pruned to their latest checkpoints). */
  swept: number;
  /** Checkpoints it discarded (keep_latest; a deletion does not count them). */
  discarded: number;
  /** Sweeps another process got to first, or that a write to the thread meanwhile called off. */
  lost: number;
}

export class CheckpointTtlSweeper {
  private readonly loop: WakeLoop;
  private stopped = false;
  readonly stats: CheckpointTtlStats = { swept: 0, discarded: 0, lost: 0 };

  constructor(private readonly o: CheckpointTtlSweeperOptions) {
    this.loop = new WakeLoop({
      clock: o.clock,
      pass: () => runInRequestContext({ actor: SYSTEM_ACTOR, causationId: "checkpoint-ttl-sweeper" }, () => this.sweepDue()),
      onError: (error) => o.log?.(`checkpoint TTL sweep failed: ${(error as Error).stack ?? String(error)}`),
    });
  }

  /** The first sweep now, then one every `sweep_interval_minutes`. */
  start(): void {
    void this.loop.run();
  }

  /** Sweeps what is due now; resolves when done (and the timer is set again). */
  sweep(): Promise<void> {
    return this.loop.run();
  }

  /** When the next sweep is (epoch ms), if the timer is set. */
  get nextSweep(): number | undefined {
    return this.loop.nextDue;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop.stop();
  }

  /** One sweep of at most `sweep_limit` threads; says when the next is. */
  private async sweepDue(): Promise<number> {
    const started = this.o.clock.now();
    const cutoff = started - this.o.defaultTtl * MINUTE_MS;
    const { readModels } = this.o.ctx;
    const due = readModels.checkpointTtl.due(cutoff, this.o.sweepLimit);
    let last: bigint | undefined;
    if (due.length > 0) {
      const checkpointer = await this.o.checkpointer();
      for (const row of due) {
        if (this.stopped) break;
        const position = await this.sweepThread(checkpointer, row);
        if (position !== undefined && (last === undefined || position > last)) last = position;
      }
    }
    // The next sweep (and whoever asks the read model) sees these threads swept.
    if (last !== undefined) await readModels.runner.waitFor(last);
    return this.o.clock.now() + this.o.sweepIntervalMinutes * MINUTE_MS;
  }

  /** Sweeps one thread if it is still idle and unswept; a position to wait for, or undefined. */
  private async sweepThread(checkpointer: CheckpointTtlCheckpointer, row: CheckpointTtlRow): Promise<bigint | undefined> {
    const threadId = row.thread_id;
    const { ctx } = this.o;
    const thread = ctx.readModels.threads.load(threadId);
    // A run waiting or running is activity the read model has not dated yet: the thread is not idle.
    if (!thread || thread.deleted || thread.activeRuns.length > 0) return undefined;
    if (this.o.strategy === "delete") {
      // Decided on the revision the thread had when judged idle: a run enqueued since, or another process's deletion, moves it.
      const stillIdle = (s: ThreadState | undefined) => s !== undefined && !s.deleted && s.revision === thread.revision;
      if (!(await deleteThread(ctx, threadId, stillIdle))) return this.lost();
      await checkpointer.deleteThread(threadId);
      this.stats.swept++;
      return undefined; // the deletion waited for the fold
    }
    // The tail: its revision is the claim's expected revision; a sweep in it after the thread's last
    // activity is another process's, not folded here yet (a keep_latest discard may be followed by its snapshot).
    const tail = await ctx.store.readStream(checkpointStream(threadId), { direction: "backwards", fromRevision: "end", maxCount: 2 });
    if (tail.some((e) => isSweepEvent(e) && e.position > row.active_position)) return this.lost();
    const kept = await checkpointer.keepLatestAt(threadId, tail[0]?.revision ?? "no_stream");
    if (!kept) return this.lost();
    this.stats.swept++;
    this.stats.discarded += kept.discarded;
    return kept.position;
  }

  private lost(): undefined {
    this.stats.lost++;
    return undefined;
  }
}

/** The sweeper's settings from `checkpointer.ttl`, or undefined when nothing expires (no `default_ttl`). */
export function checkpointTtlSettings(
  ttl: { strategy: CheckpointTtlStrategy; default_ttl?: number | null; sweep_interval_minutes: number; sweep_limit: number } | null | undefined,
): CheckpointTtlSettings | undefined {
  if (!ttl || ttl.default_ttl === undefined || ttl.default_ttl === null) return undefined;
  return { strategy: ttl.strategy, defaultTtl: ttl.default_ttl, sweepIntervalMinutes: ttl.sweep_interval_minutes, sweepLimit: ttl.sweep_limit };
}
