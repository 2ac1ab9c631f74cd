import { runInRequestContext, type RequestContext } from "../context/request-context.js";
import { systemClock, type Clock } from "../context/clock.js";
import { ulid } from "ulid";
import type { BaseCheckpointSaver, BaseStore } from "@langchain/langgraph-checkpoint";
import { AppendTicket, WrongExpectedVersionError, type EventData, type EventStore, type RecordedEvent } from "../eventstore/types.js";
import type { ReadModels } from "../read-models/all.js";
import {
  RUN_OUTPUT_STREAM_PREFIX,
  RUN_STREAM_PREFIX,
  RUN_VALUES_STREAM_PREFIX,
  decideClaim,
  decideEnd,
  runStream,
  runViewOf,
  type CancelAction,
  type RunEnded,
  type RunView,
} from "../domain/runs.js";
import type { RunRecord } from "../domain/run-record.js";
import { isEvent } from "../domain/event-of.js";
import { THREAD_STREAM_PREFIX, threadStream } from "../domain/threads.js";
import { executeRun, type GraphSource } from "./execute-run.js";
import { serializeError, type SseEvent } from "./stream-modes.js";
import { RunStreamWriter } from "./run-stream-writer.js";
import { externalizeIfLarge, externalizeText, largeJsonText, outputReference, resolveLarge, surelyLarge } from "../eventstore/large-values.js";
import { completeOnThread, loadRunStream, type CompletionDeps } from "./run-completion.js";
import {
  baseCheckpointOf,
  endedByFailure,
  endedOf,
  isUnclaimed,
  leaseExpiry,
  mayTakeOver,
  planClaim,
  resumesFromCheckpoint,
  startDelayMs,
} from "../domain/run-rules.js";
import { tracePoint } from "../util/trace-points.js";
import { isPoison } from "../read-models/quarantine.js";
import { TurnGate } from "../util/turn-gate.js";

/** The subscriber name of the worker's quarantine records. */
export const RUN_WORKER_SUBSCRIBER = "run-worker";
/** Graphs a worker starts per turn of the event loop (see RunWorker.graphStarts). */
const GRAPH_STARTS_PER_TURN = 32;

export interface WorkerOptions extends CompletionDeps {
  store: EventStore;
  readModels: ReadModels;
  graphs: GraphSource;
  checkpointer: BaseCheckpointSaver & {
    latestCheckpointId(threadId: string): Promise<string | null>;
    /** Waits for the thread's deferred checkpoint writes, throwing the first that failed. */
    flush?(threadId: string): Promise<void>;
    /** The tickets of the thread's deferred checkpoint appends in flight (see EventSourcedCheckpointSaver). */
    writesInFlight?(threadId: string): AppendTicket[];
  };
  /** Runs executed at once by this process. */
  maxConcurrentRuns: number;
  /** A run executing longer than this is aborted and ends with status `timeout` (default: none). */
  runTimeoutMs?: number;
  /** Identifies this process in claims. */
  owner?: string;
  /** How long a claim holds without renewal (ms). */
  leaseMs?: number;
  /**
   * Whether claims of other owners that are still open at startup belong to dead processes (true
   * for the single-process SQLite store, which holds an exclusive lock). With a shared store
   * (ESDB) only expired leases are taken over.
   */
  exclusiveStore: boolean;
  /** The store a run's graph gets (writes attributed to the run); none: graphs run without a store. */
  storeFor?(run: RunRecord): BaseStore;
  /** Leases and delayed starts (`after_seconds`); the time line of the log's timestamps. Default: the system's. */
  clock?: Clock;
}

interface Active {
  controller: AbortController;
  cancel?: CancelAction;
  timedOut?: boolean;
  /** Our claim is in the log (only then is there a lease to renew). */
  claimed?: boolean;
  /** The log refused our claim: another worker's came first. */
  lost?: boolean;
  done: Promise<void>;
}

/**
 * The run worker: claims runs (an append with the run stream's expected revision; exactly one
 * claimer wins), executes them with bounded concurrency, and ends each with exactly one RunEnded.
 * It learns about work from the projection runner (`onApplied`), never by polling: a run starts as
 * soon as it is the head of its thread and a slot is free.
 *
 * A run it cannot handle because of what the log holds for it (a record or stream its code throws
 * on) is quarantined and left alone: never a reason to stop, to fail the start, or to try it again
 * in a loop. A run that threw after its claim is ended with that error, so its callers get an answer.
 */
export class RunWorker {
  readonly owner: string;
  /** Claims this worker appended, and claims the log refused because another worker's was there first. */
  readonly stats = { claimed: 0, lost: 0 };
  private readonly leaseMs: number;
  private readonly clock: Clock;
  private readonly active = new Map<string, Active>();
  /** Threads whose head run may be startable, in arrival order. */
  private readonly ready = new Set<string>();
  private readonly timers = new Map<string, { cancel(): void }>();
  /** Runs claimed (by anyone) and not ended: what a lease check looks at. */
  private readonly openClaims = new Set<string>();
  /**
   * Graphs started per turn of the event loop: one commit releases the claims of a whole burst of runs at once,
   * and their graphs' first steps, started together, would hold the loop for one long stretch (no request
   * read, no stream's first event written) before any of them reaches its model.
   */
  private readonly graphStarts = new TurnGate(GRAPH_STARTS_PER_TURN);
  private unsubscribe: (() => void) | undefined;
  private renewTimer: NodeJS.Timeout | undefined;
  private stopping = false;

  constructor(private readonly o: WorkerOptions) {
    // A ULID sorts by creation time, so the audit trail shows which worker generation claimed a run.
    this.owner = o.owner ?? `worker-${ulid()}`;
    this.leaseMs = o.leaseMs ?? 30_000;
    this.clock = o.clock ?? systemClock;
  }

  /** Runs this process executes now: claimed by it in the log and not ended (claims being tried do not count). */
  get running(): number {
    let n = 0;
    for (const a of this.active.values()) if (a.claimed) n++;
    return n;
  }

  /** The context of the worker's appends: its actor, and for a run its id and the request that enqueued it. */
  private context(run?: RunRecord): RequestContext {
    if (!run) return { actor: `worker:${this.owner}` };
    // Read defensively: a record an older version wrote may lack its config.
    const requestId = (run.kwargs?.config as { configurable?: { langgraph_request_id?: unknown } } | undefined)?.configurable?.langgraph_request_id;
    return { actor: `worker:${this.owner}`, correlationId: run.run_id, causationId: typeof requestId === "string" ? requestId : `run:${run.run_id}` };
  }

  /** Subscribes to the read models, recovers runs of dead processes, starts what is startable. */
  start(): Promise<void> {
    // Everything the worker appends (recovery, lease renewals, from timers too) is attributed to it.
    return runInRequestContext(this.context(), () => this.startInContext());
  }

  private async startInContext(): Promise<void> {
    this.unsubscribe = this.o.readModels.runner.onApplied((event) => this.onEvent(event), RUN_WORKER_SUBSCRIBER);
    for (const v of this.o.readModels.runs.openClaims()) this.openClaims.add(v.run.run_id);
    await this.recover();
    for (const threadId of this.o.readModels.threads.idsWithActiveRuns()) this.ready.add(threadId);
    this.pump();
    if (!this.o.exclusiveStore) {
      this.renewTimer = setInterval(
        () => {
          this.renewAndTakeOver().catch((error: unknown) => console.error(`run worker: lease renewal: ${(error as Error).stack ?? String(error)}`));
        },
        Math.max(50, Math.floor(this.leaseMs / 3)),
      );
      this.renewTimer.unref();
    }
  }

  /** Stops taking work and aborts what runs; their claims stay open so the next start resumes them. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.unsubscribe?.();
    if (this.renewTimer) clearInterval(this.renewTimer);
    for (const t of this.timers.values()) t.cancel();
    this.timers.clear();
    for (const a of this.active.values()) a.controller.abort(new Error("server shutting down"));
    await Promise.allSettled([...this.active.values()].map((a) => a.done));
  }

  /**
   * A run just enqueued at the head of its thread, not yet shown by the read models: claimed and
   * executed now if a slot is free (the claim's expected revision keeps it exactly once). With the
   * enqueue's ticket (its append issued, maybe not committed) the claim depends on it: written only
   * if the enqueue is, in the same commit on the embedded store. Otherwise it starts the usual way,
   * once the read models show it.
   */
  offer(run: RunRecord, enqueued?: AppendTicket): void {
    if (this.stopping || this.active.has(run.run_id) || this.active.size >= this.o.maxConcurrentRuns) return;
    if (startDelayMs(run, this.clock.now()) > 0) return;
    this.launch(runViewOf(run), false, enqueued);
  }

  private onEvent(event: RecordedEvent): void {
    if (this.stopping) return;
    if (event.streamId.startsWith(RUN_STREAM_PREFIX)) {
      if (event.type === "RunClaimed") this.openClaims.add(event.streamId.slice(RUN_STREAM_PREFIX.length));
      else if (event.type === "RunEnded") this.openClaims.delete(event.streamId.slice(RUN_STREAM_PREFIX.length));
      else if (isEvent(event, "RunCancelRequested")) {
        const a = this.active.get(event.streamId.slice(RUN_STREAM_PREFIX.length));
        if (a && !a.cancel) {
          a.cancel = event.data.action;
          a.controller.abort(new Error(`run cancelled (${a.cancel})`));
        }
      }
      return;
    }
    if (event.type === "RunEnqueued" || event.type === "RunFinished") {
      // A run already launched at its enqueue (offer: the thread's head, early start) leaves its thread nothing to start now.
      if (isEvent(event, "RunEnqueued") && this.active.has(event.data.run.run_id)) return;
      this.ready.add(event.streamId.slice(THREAD_STREAM_PREFIX.length));
      this.pump();
    }
  }

  private pump(): void {
    while (!this.stopping && this.active.size < this.o.maxConcurrentRuns && this.ready.size > 0) {
      const threadId = this.ready.values().next().value as string;
      this.ready.delete(threadId);
      try {
        const view = this.startableHead(threadId);
        if (view) this.launch(view, false);
      } catch (error) {
        // The thread is looked at again on its next event, not in a loop.
        if (!isPoison(error)) throw error;
        this.gaveUp(threadStream(threadId), error);
      }
    }
  }

  /** Records in the quarantine that the worker left `stream`'s run (or thread) alone, and why. */
  private gaveUp(stream: string, error: unknown): void {
    this.o.readModels.runner.quarantine.tryRecord(RUN_WORKER_SUBSCRIBER, { streamId: stream }, error);
  }

  private startableHead(threadId: string): RunView | undefined {
    const head = this.o.readModels.threads.headRun(threadId);
    if (!head || this.active.has(head)) return undefined;
    const view = this.o.readModels.runs.load(head);
    if (!view || !isUnclaimed(view.stream)) return undefined;
    const wait = startDelayMs(view.run, this.clock.now());
    if (wait > 0) {
      if (!this.timers.has(head)) {
        const timer = this.clock.setTimer(wait, () => {
          this.timers.delete(head);
          this.ready.add(threadId);
          this.pump();
        });
        this.timers.set(head, timer);
      }
      return undefined;
    }
    return view;
  }

  /** Takes a slot, claims the run, executes it; frees the slot and looks for more work at the end. */
  private launch(view: RunView, takeover: boolean, enqueued?: AppendTicket): void {
    const runId = view.run.run_id;
    const controller = new AbortController();
    const entry: Active = { controller, done: Promise.resolve() };
    this.active.set(runId, entry);
    let poisoned = false;
    entry.done = runInRequestContext(this.context(view.run), () => this.claimAndRun(view, takeover, entry, enqueued))
      .catch(async (error: unknown) => {
        if (this.stopping) return;
        console.error(`run ${runId}: ${(error as Error).stack ?? String(error)}`);
        if (!isPoison(error)) return;
        // Trying it again would fail the same way: it is quarantined, and ended if it was claimed.
        poisoned = true;
        this.gaveUp(runStream(runId), error);
        if (entry.claimed) await this.endAfterFailure(view.run, error as Error);
      })
      .catch((error: unknown) => console.error(`run ${runId}: could not be ended: ${(error as Error).stack ?? String(error)}`))
      .finally(() => {
        this.active.delete(runId);
        // A lost claim is not retried: until our read models show the winner's claim, a retry would
        // be refused again (a loop of appends). The winner's end (RunFinished) makes the thread ready.
        // Nor is a run given up on: its thread is looked at again on its next event.
        if (!entry.lost && !poisoned) this.ready.add(view.run.thread_id);
        try {
          this.pump();
        } catch (error) {
          console.error(`run worker: ${(error as Error).stack ?? String(error)}`);
        }
      });
  }

  private async claimAndRun(view: RunView, takeover: boolean, entry: Active, enqueued?: AppendTicket): Promise<void> {
    tracePoint("run.claim");
    const run = view.run;
    const stream = takeover ? await loadRunStream(this.o.store, run.run_id) : view.stream;
    const nowMs = this.clock.now();
    // The view that chose the takeover may be behind the log: another worker may have taken the run
    // over since, and holds a live lease. The decision is taken again on the stream as it is now.
    if (takeover && !mayTakeOver(stream, { owner: this.owner, nowMs, exclusiveStore: this.o.exclusiveStore })) return;
    const latest = await this.o.checkpointer.latestCheckpointId(run.thread_id);
    const claim = decideClaim(stream, { owner: this.owner, now: this.o.now(), nowMs, leaseMs: this.leaseMs, takeover, baseCheckpointId: latest });
    if (!claim.ok) return;
    // Executed, or (cancelled while its worker was down, or its workers died too often) ended at once.
    const plan = planClaim(stream, { runId: run.run_id, takeover });
    let claimed;
    try {
      // The claim and the stream's first event go in one append (one commit before the first byte).
      claimed = await this.o.commands.append({
        stream: runStream(run.run_id),
        events: [...claim.events, ...plan.first],
        expected: stream.revision,
        onConflict: "lose",
        ...(enqueued ? { after: [enqueued] } : {}),
      });
    } catch (error) {
      // The enqueue itself was refused (its command retries it): nothing was claimed, and the thread is looked at again (finally).
      if (enqueued?.state === "failed") return;
      throw error;
    }
    if (!claimed) {
      this.stats.lost++;
      entry.lost = true;
      return; // another worker won
    }
    const revision = claimed.nextExpectedRevision;
    tracePoint("run.claimed");
    this.stats.claimed++;
    entry.claimed = true;
    const base = baseCheckpointOf(stream, latest);
    if (plan.end) {
      await this.end(run, revision, { ...plan.end, ended_at: this.o.now() }, base);
      return;
    }
    const resume = resumesFromCheckpoint(takeover, latest, base);
    const timeoutMs = this.o.runTimeoutMs;
    const timer = timeoutMs
      ? setTimeout(() => {
          entry.timedOut = true;
          entry.controller.abort(new Error(`run exceeded ${timeoutMs / 1000}s`));
        }, timeoutMs)
      : undefined;
    // A chunk too large for one append (a whole large state in `values` mode) is written beside the run.
    const shrink = async (e: EventData): Promise<EventData> => {
      if (!isEvent(e, "RunOutput")) return e;
      const d = e.data;
      return { ...e, data: { event: d.event, data: await externalizeIfLarge(this.o.store, RUN_OUTPUT_STREAM_PREFIX, run.run_id, d.data) } };
    };
    const writer = new RunStreamWriter(this.o.commands, runStream(run.run_id), revision, shrink);
    // The `values` output event of each data object emitted: a large result that is one of them is referenced, not written again.
    const valuesOutputs = new WeakMap<object, EventData>();
    // The mapper's `{event, data}` is the RunOutput's data as it is: it may carry its JSON text (see dataWithText).
    const output = (sse: SseEvent) => {
      const e: EventData = { type: "RunOutput", data: sse };
      const { event, data } = sse;
      const isValues = event === "values" && typeof data === "object" && data !== null;
      if (isValues) valuesOutputs.set(data, e);
      writer.push(e, isValues);
    };
    // A large input was written beside the run: the graph gets the value itself.
    const kwargs = { ...run.kwargs, input: await resolveLarge(this.o.store, run.kwargs.input), command: await resolveLarge(this.o.store, run.kwargs.command) };
    // Only a burst can hold the loop this way: with few runs active, a graph starts at once, as before.
    const turn = this.active.size > GRAPH_STARTS_PER_TURN ? this.graphStarts.pass() : undefined;
    if (turn) await turn;
    tracePoint("graph.start");
    let outcome = await executeRun({
      run: { ...run, kwargs },
      graphs: this.o.graphs,
      checkpointer: this.o.checkpointer,
      store: this.o.storeFor?.(run),
      signal: entry.controller.signal,
      resume,
      // The attempt the claim above recorded.
      attempt: stream.attempt + 1,
      emit: output,
    });
    tracePoint("graph.end");
    clearTimeout(timer);
    if (this.stopping) {
      await Promise.all([writer.drain(), this.o.checkpointer.flush?.(run.thread_id)]).catch(() => undefined);
      return; // claim stays open: the next start resumes the run
    }
    // The end depends on the run's checkpoint writes still in flight (written with them, never without);
    // a checkpointer that cannot say is waited for. A write the log already refused fails the run.
    let writes: AppendTicket[] = [];
    try {
      if (this.o.checkpointer.writesInFlight) writes = this.o.checkpointer.writesInFlight(run.thread_id);
      else await this.o.checkpointer.flush?.(run.thread_id);
    } catch (error) {
      if (outcome.status !== "error") outcome = { status: "error", error: serializeError(error), aborted: false };
    }
    const ended = endedOf(
      outcome,
      { cancel: entry.cancel, timedOut: entry.timedOut, timeoutMs: this.o.runTimeoutMs },
      {
        endedAt: this.o.now(),
        recoveredFrom: takeover ? stream.owner : undefined,
      },
    );
    // A final state too large for one event is referenced where it already is (the last values output) or written beside the run.
    if (ended.values !== undefined) ended.values = await storedValues(this.o.store, run.run_id, writer, ended.values, valuesOutputs);
    if (ended.error) output({ event: "error", data: ended.error });
    // Urgent: `/wait`, `/join`, stream ends and webhooks wait for this commit. The thread's mark goes with
    // the end (one commit for the run's last checkpoints and outputs, its end and the mark) and only if
    // the end is written; a rollback or a temporary thread has more to do in between, after the end.
    const endTicket = new AppendTicket();
    const finishing = writer.finish([{ type: "RunEnded", data: ended }], { urgent: true, ticket: endTicket, after: writes });
    const alongside = ended.status !== "rollback" && !run.kwargs.temporary;
    const marking = alongside ? completeOnThread(this.o, run, ended, base, { after: [endTicket] }) : undefined;
    marking?.catch(() => undefined); // its failure is the end's, handled below
    try {
      await finishing;
      tracePoint("run.end.committed");
    } catch (error) {
      // A failed write of the run's is reported here: not kept for the thread's next run.
      await this.o.checkpointer.flush?.(run.thread_id).catch(() => undefined);
      // The writer may still be writing outputs (finish() hands them back to it when it cannot write
      // them with the end): the end follows them rather than racing them, and is written whatever
      // became of them, so that the run never stays claimed, with /join and /wait waiting on it.
      const unwritten = await writer.drain().then(
        () => undefined,
        (e: unknown) => e as Error,
      );
      if (!(error instanceof WrongExpectedVersionError) || unwritten) {
        // The log refused the outputs (never a hang with the claim held): the run ends with that error.
        const failure = error instanceof WrongExpectedVersionError && unwritten ? unwritten : (error as Error);
        await this.end(run, (await loadRunStream(this.o.store, run.run_id)).revision as bigint, endedByFailure(failure, this.o.now()), base);
        return;
      }
      // Someone appended meanwhile (a cancel request): the rest is written, end it the careful way.
      await this.end(run, writer.revision, ended, base);
      return;
    }
    // The end is written. Its mark went with it unless the end's first attempt was refused (outputs
    // too many for one append with it, written in parts before it): then the mark is written on its own.
    if (marking) await marking.catch(() => this.completed(run, ended, base));
    else await this.completed(run, ended, base);
  }

  /** Appends RunEnded (only the owner, only once), then the thread's RunFinished mark. */
  private async end(run: RunRecord, revision: bigint, ended: RunEnded, base: string | null): Promise<void> {
    const appended = await this.o.commands.append({
      stream: runStream(run.run_id),
      events: [{ type: "RunEnded", data: ended }],
      expected: revision,
      urgent: true,
      onConflict: {
        // Someone appended meanwhile (a cancel request): decide again on the stream as it is.
        reconsider: async () => {
          const current = await loadRunStream(this.o.store, run.run_id);
          const decision = decideEnd(current, this.owner, ended);
          return decision.ok ? { events: decision.events, expected: current.revision } : undefined;
        },
      },
    });
    if (appended) await this.completed(run, ended, base);
  }

  private async completed(run: RunRecord, ended: RunEnded, base: string | null): Promise<void> {
    await completeOnThread(this.o, run, ended, base);
  }

  /** A claimed run whose handling threw (see launch): ended with that error, unless it has ended. */
  private async endAfterFailure(run: RunRecord, error: Error): Promise<void> {
    const stream = await loadRunStream(this.o.store, run.run_id);
    if (stream.ended || stream.owner !== this.owner) return;
    await this.end(run, stream.revision as bigint, endedByFailure(error, this.o.now()), null);
  }

  /**
   * At startup: runs claimed but not ended belong to dead processes (exclusive store) or to
   * processes whose lease expired; take them over and resume them. Runs that ended but whose
   * thread never got the RunFinished mark get it now.
   */
  private async recover(): Promise<void> {
    const nowMs = this.clock.now();
    for (const view of this.o.readModels.runs.endedUnmarked()) {
      try {
        // The read model keeps only the terminal status: the thread's mark needs the full RunEnded.
        const s = await loadRunStream(this.o.store, view.run.run_id);
        if (s.ended) await completeOnThread(this.o, view.run, s.ended, s.base_checkpoint_id);
      } catch (error) {
        // One run the log holds something unreadable for does not keep the server from starting.
        if (!isPoison(error)) throw error;
        this.gaveUp(runStream(view.run.run_id), error);
      }
    }
    for (const view of this.o.readModels.runs.openClaims()) {
      try {
        if (mayTakeOver(view.stream, { owner: this.owner, nowMs, exclusiveStore: this.o.exclusiveStore })) this.launch(view, true);
      } catch (error) {
        if (!isPoison(error)) throw error;
        this.gaveUp(runStream(view.run.run_id), error);
      }
    }
  }

  /** Shared store only: renews the leases of our runs and takes over runs whose lease expired. */
  private async renewAndTakeOver(): Promise<void> {
    if (this.stopping) return;
    const nowMs = this.clock.now();
    const renewals = [...this.active]
      .filter(([, a]) => a.claimed)
      .map(([runId]) =>
        this.o.commands
          .append({
            stream: runStream(runId),
            events: [{ type: "RunLeaseRenewed", data: { owner: this.owner, lease_expires_at: leaseExpiry(nowMs, this.leaseMs) } }],
            expected: "any",
          })
          .catch(() => undefined),
      );
    await Promise.all(renewals);
    for (const runId of this.openClaims) {
      const view = this.o.readModels.runs.load(runId);
      if (!view) {
        this.openClaims.delete(runId);
        continue;
      }
      if (this.active.has(runId) || this.active.size >= this.o.maxConcurrentRuns) continue;
      try {
        if (mayTakeOver(view.stream, { owner: this.owner, nowMs, exclusiveStore: this.o.exclusiveStore })) this.launch(view, true);
      } catch (error) {
        if (!isPoison(error)) throw error;
        this.gaveUp(runStream(runId), error);
      }
    }
  }
}

/**
 * A run's final values as its RunEnded holds them: as they are when small; when too large for one
 * event and the data of one of the run's own `values` outputs (a run that ended normally), a
 * reference to that output once it is written; otherwise written beside the run (`run-values-{id}`).
 */
async function storedValues(store: EventStore, runId: string, writer: RunStreamWriter, values: unknown, outputs: WeakMap<object, EventData>): Promise<unknown> {
  const source = typeof values === "object" && values !== null ? outputs.get(values) : undefined;
  // A reference needs no JSON text of the values, only to know that they are large: usually plain.
  const sure = source !== undefined && surelyLarge(values);
  const text = sure ? undefined : largeJsonText(values);
  if (!sure && text === undefined) return values;
  const revision = source && (await writer.revisionOf(source).catch(() => undefined));
  if (revision !== undefined) return outputReference(writer.stream, revision, "values");
  return externalizeText(store, RUN_VALUES_STREAM_PREFIX, runId, text ?? (largeJsonText(values) as string));
}
