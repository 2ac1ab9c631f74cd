/**
 * A run's life after its creation, as the callers of the API see it: who waits for which run and is
 * woken when, what /wait and /join answer and when their headers may go, and the run's output
 * events for a stream. The one place that knows the fast path of an answer:
 * - a run's end is answered as soon as it is durable in the log (the thread's RunFinished mark
 *   delivered), before the read models fold it; a later request still sees the run done, because
 *   the read models fold what was delivered before serving it (CatchUpRunner.settle);
 * - a run created for its result (a /wait) is answered from its record until the read models show
 *   it, since its creation does not wait for the enqueue's fold (RunsService.create's `forResult`);
 * - a /wait holds its headers back a little, so that a quick run is answered in one write, and
 *   sends them only once everything it names is durable;
 * - a stream of a run its request created gets its first event, which names only the run, at once,
 *   not through the tail of the run's stream, where it would wait behind other runs' outputs;
 * - a temporary thread's run is done only once its thread is deleted.
 * docs/architecture.md ("How a run lives") follows a run through it.
 */
import { setImmediate as afterThisTurn } from "node:timers/promises";
import type { AppContext } from "./context.js";
import { threadState } from "./threads.js";
import { isLargeValueMarker, withValuesResolved } from "../eventstore/large-values.js";
import type { RecordedEvent } from "../eventstore/types.js";
import { emptyRunStream, type RunEnded, type RunView } from "../domain/runs.js";
import { planClaim } from "../domain/run-rules.js";
import { chunkOf, SKIP, splitOutputText, tailRunMapped } from "../runtime/run-tail.js";
import { dataTextOf } from "../eventstore/data-text.js";
import { sseDataText } from "../util/sse-writer.js";
import type { RunRecord } from "../domain/run-record.js";
import type { RunDoneness } from "../read-models/runs.js";
import { isEvent } from "../domain/event-of.js";
import { THREAD_STREAM_PREFIX } from "../domain/threads.js";
import { readRunEnd } from "../runtime/run-completion.js";

/** How long a /wait may hold its headers back hoping to send them with the result. */
const WAIT_HEADERS_DELAY_MS = 50;

/**
 * Where a run's first output is in `run-{id}`: the first claim (revision 0) is appended together with
 * it (see planClaim), and nothing is appended to the stream before that claim but an end.
 */
const FIRST_OUTPUT_REVISION = 1n;

/** One output of a run for a stream: its event name, its data as JSON text (large values resolved), and its stream revision. */
export interface RunOutputEvent {
  event: string;
  json: string;
  revision: bigint;
}

/** What a /wait or /join answers, and when. */
export interface WaitAnswer {
  /**
   * Resolves when the response's headers should go without the result (a run that takes a while): a
   * little after the request, once everything the headers name is durable. Undefined: the run is done,
   * the result goes at once.
   */
  headersDue: Promise<void> | undefined;
  /** The result, once the run's end is durable (or the wait is aborted). */
  result: Promise<unknown>;
}

/**
 * The result a finished run reports to /wait and /join, from its terminal event: what the official
 * servers answer, the run's last `values` chunk (JS `Runs.wait` in libs/langgraph-api/src/storage/ops.mts,
 * Python `wait_run` / `Runs.join`). A graph that stopped at an interrupt emitted `{"__interrupt__": [...]}`
 * last (`[]` for interrupt_before / interrupt_after), not its state; an error is `{"__error__": ...}`.
 * `undefined`: the run left no values (cancelled before it started): the caller answers the thread's.
 */
export function runResult(ended: RunEnded | undefined): unknown {
  if (!ended) return {};
  if (ended.error && ended.status !== "interrupted") return { __error__: ended.error };
  if (ended.status === "interrupted" && ended.interrupts !== undefined && !ended.values_after_interrupt) {
    return { __interrupt__: Object.values(ended.interrupts).flatMap((v) => (Array.isArray(v) ? v : [])) };
  }
  return ended.values;
}

export class RunLifecycle {
  /**
   * Who waits for which run, with the run's thread (a temporary thread's deletion ends its run):
   * `wakes` once the read models show the run done, `resultWakes` as soon as the log has its end (see waitEnded).
   */
  private readonly waiters = new Map<string, { threadId: string; temporary: boolean; wakes: (() => void)[]; resultWakes: (() => void)[] }>();
  /** Open streams and waits, ended when the server shuts down. */
  private readonly open = new Set<() => void>();
  private readonly unsubscribe: () => void;
  private readonly unsubscribeDelivered: () => void;
  /** Runs whose RunFinished mark was delivered and is not folded yet: at most one batch of them (see waitEnded). */
  private readonly endedUnfolded = new Set<string>();
  /**
   * Runs created for their result (a /wait) whose RunEnqueued the read models have not folded yet: their
   * creation did not wait for it (see create's `forResult`). Each leaves at that fold.
   */
  private readonly enqueuedUnfolded = new Set<string>();
  private closed = false;

  constructor(private readonly ctx: AppContext) {
    this.unsubscribe = ctx.readModels.runner.onApplied((event) => this.onEvent(event));
    this.unsubscribeDelivered = ctx.readModels.runner.onDelivered((event) => this.onDelivered(event));
  }

  /** Registers something to end at shutdown; returns the function that unregisters it. */
  track(end: () => void): () => void {
    this.open.add(end);
    return () => this.open.delete(end);
  }

  close(): void {
    this.closed = true;
    this.unsubscribe();
    this.unsubscribeDelivered();
    for (const end of [...this.open]) end();
    this.open.clear();
    for (const waiting of this.waiters.values()) for (const wake of [...waiting.wakes, ...waiting.resultWakes]) wake();
    this.waiters.clear();
  }

  /**
   * A run created for its result (a /wait) whose enqueue the read models do not show yet: answered from
   * its record until they do. Then the rest of the request's handling yields to the run's graph, started
   * by the head listener when the thread is free, and comes once the event loop turns, typically while
   * the run's last commit is being synced, where the main thread waits anyway.
   */
  async createdForResult(runId: string): Promise<void> {
    this.enqueuedUnfolded.add(runId);
    await afterThisTurn();
  }

  /** Wakes the waiters of the runs this event may have ended: only those (a look at each costs a read-model load). */
  private onEvent(event: RecordedEvent): void {
    if (isEvent(event, "RunFinished") && this.endedUnfolded.size > 0) this.endedUnfolded.delete(event.data.run_id);
    if (isEvent(event, "RunEnqueued") && this.enqueuedUnfolded.size > 0) this.enqueuedUnfolded.delete(event.data.run.run_id);
    if (this.waiters.size === 0 || !event.streamId.startsWith(THREAD_STREAM_PREFIX)) return;
    if (isEvent(event, "RunFinished") || isEvent(event, "RunDeleted")) {
      this.wakeIfDone(event.data.run_id);
    } else if (event.type === "ThreadDeleted") {
      const threadId = event.streamId.slice(THREAD_STREAM_PREFIX.length);
      for (const [runId, waiting] of [...this.waiters]) if (waiting.threadId === threadId) this.wakeIfDone(runId);
    }
  }

  /**
   * A run's end reached the log (durable) before the read models fold it: who waits for its result
   * is answered now. The thread's RunFinished mark is written only with the run's RunEnded, so the
   * result is there to read. A temporary thread's run is done only once the thread is deleted: its
   * waiters stay for the fold.
   */
  private onDelivered(event: RecordedEvent): void {
    if (!isEvent(event, "RunFinished") || !event.streamId.startsWith(THREAD_STREAM_PREFIX)) return;
    const runId = event.data.run_id;
    this.endedUnfolded.add(runId);
    const waiting = this.waiters.get(runId);
    if (!waiting || waiting.temporary || waiting.resultWakes.length === 0) return;
    const wakes = waiting.resultWakes.splice(0);
    if (waiting.wakes.length === 0) this.waiters.delete(runId);
    for (const wake of wakes) wake();
  }

  private wakeIfDone(runId: string): void {
    const waiting = this.waiters.get(runId);
    if (!waiting || !this.isDone(runId)) return;
    this.waiters.delete(runId);
    for (const wake of [...waiting.wakes, ...waiting.resultWakes]) wake();
  }

  private view(runId: string): RunView | undefined {
    return this.ctx.readModels.runs.load(runId);
  }

  /**
   * The run's terminal event, read from `run-{id}` (the read model keeps only its status): what
   * /wait and /join return. Undefined while the run has not ended (or never existed).
   */
  async terminalEvent(runId: string): Promise<RunEnded | undefined> {
    const ended = await readRunEnd(this.ctx.store, runId);
    return ended && isEvent(ended, "RunEnded") ? ended.data : undefined;
  }

  /**
   * Waits for the run's end, then returns what /wait and /join answer. The answer is read from the
   * log, so it goes out as soon as the end is durable (waitEnded), before the read models fold it.
   */
  async waitResult(runId: string, signal?: AbortSignal, created?: RunRecord): Promise<unknown> {
    await this.waitEnded(runId, signal, created);
    const ended = await this.terminalEvent(runId);
    const result = runResult(ended && (await withValuesResolved(this.ctx.store, ended)));
    if (result !== undefined) return result;
    // A run cancelled before it made any state: the thread's values, as the Python server's join falls
    // back to (`null` when it has none; a stateless run's thread is gone: `{}`, as Python answers).
    const tid = created?.thread_id ?? this.view(runId)?.run.thread_id;
    const thread = tid === undefined ? undefined : threadState(this.ctx, tid);
    if (!thread) return {};
    return (await withValuesResolved(this.ctx.store, thread.thread)).values ?? null;
  }

  /** Whether the run is over as far as its thread is concerned (or gone); a temporary thread is deleted by then. */
  isDone(runId: string, created?: RunRecord): boolean {
    return this.isDoneAs(this.donenessOf(runId, created));
  }

  /** The read models' doneness of a run, or, for a run created for its result and not folded yet, what its record says. */
  private donenessOf(id: string, created?: RunRecord): RunDoneness | undefined {
    const shown = this.ctx.readModels.runs.doneness(id);
    if (shown || !created || !this.enqueuedUnfolded.has(id)) return shown;
    return { threadId: created.thread_id, threadFinished: this.endedUnfolded.has(id), temporary: created.kwargs.temporary === true };
  }

  private isDoneAs(d: RunDoneness | undefined): boolean {
    if (!d) return true;
    if (!d.threadFinished) return false;
    return !d.temporary || !threadState(this.ctx, d.threadId);
  }

  /** Resolves once the run ended and its thread shows it in the read models (or the run is gone). */
  waitDone(runId: string, signal?: AbortSignal): Promise<void> {
    return this.waitFor(runId, "wakes", signal);
  }

  /**
   * Resolves once the run's end is durable in the log (the thread's RunFinished mark delivered, now or
   * before this call), or the run is done as waitDone sees it, whichever comes first: for answers read
   * from the log only (a /wait or /join result, the end of a run's SSE stream).
   * A later request still sees the run done: the read models fold what was delivered before serving it
   * (CatchUpRunner.settle). `created`: the run, when the caller created it for its result (see create's
   * `forResult`): the read models may not show it yet.
   */
  waitEnded(runId: string, signal?: AbortSignal, created?: RunRecord): Promise<void> {
    return this.waitFor(runId, "resultWakes", signal, created);
  }

  /**
   * Resolves once the run's end is durable and the read models show it: waitEnded, then what the log
   * delivered folded now (CatchUpRunner.settle), rather than in the fold's own turn of the event loop.
   * For answers built from the read models (A2A tasks).
   */
  async waitShown(runId: string, signal?: AbortSignal): Promise<void> {
    await this.waitEnded(runId, signal);
    this.ctx.readModels.runner.settle();
  }

  private waitFor(id: string, list: "wakes" | "resultWakes", signal?: AbortSignal, created?: RunRecord): Promise<void> {
    if (this.closed || signal?.aborted) return Promise.resolve();
    const doneness = this.donenessOf(id, created);
    if (!doneness || this.isDoneAs(doneness)) return Promise.resolve();
    if (list === "resultWakes" && !doneness.temporary && this.endedUnfolded.has(id)) return Promise.resolve();
    return new Promise((resolve) => {
      const wake = () => resolve();
      const waiting = this.waiters.get(id) ?? { threadId: doneness.threadId, temporary: doneness.temporary, wakes: [], resultWakes: [] };
      waiting[list].push(wake);
      this.waiters.set(id, waiting);
      signal?.addEventListener("abort", wake, { once: true });
    });
  }

  /**
   * What a /wait or /join answers (see WaitAnswer). `created`: the run, when the caller created it for
   * its result. Aborting `signal` (the client left) ends the wait.
   */
  answer(runId: string, signal: AbortSignal, created?: RunRecord): WaitAnswer {
    const result = this.waitResult(runId, signal, created);
    if (this.isDone(runId, created)) return { headersDue: undefined, result };
    const headersDue = new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        const durable = this.ctx.store.whenDurable();
        if (durable) durable.then(resolve, () => undefined);
        else resolve();
      }, WAIT_HEADERS_DELAY_MS);
      // An answer that came first needs no headers of their own (its failure is the caller's to handle).
      const cancel = () => clearTimeout(timer);
      result.then(cancel, cancel);
    });
    return { headersDue, result };
  }

  /**
   * The run's outputs after `from` (exclusive stream revision), from the log, live until its RunEnded;
   * then, once the end is durable, the tail ends (the thread shows the outcome by then).
   * `accept` filters by event name. Stops when `signal` aborts.
   */
  outputs(runId: string, from: bigint | "start", accept: (event: string) => boolean, signal: AbortSignal): AsyncIterableIterator<RunOutputEvent> {
    return this.tail(runId, from, accept, signal, undefined);
  }

  /**
   * The outputs of a run the caller has just created (its enqueue committed), for its stream from the
   * start: the `metadata` output its first claim writes comes first and at once, before the run is
   * claimed and without reading the run's stream. That event names only the run, which is known by
   * now, while the tail of the run's stream delivers it behind what other runs are writing: so a
   * stream's first answer does not depend on other streams' traffic. The same event (same data, same
   * revision, so the same SSE id) is then skipped when the tail reaches it: the client sees the
   * stream a later join from the start sees. A run cancelled before any claim never writes it.
   */
  createdOutputs(runId: string, accept: (event: string) => boolean, signal: AbortSignal): AsyncIterableIterator<RunOutputEvent> {
    const [first] = planClaim(emptyRunStream, { runId, takeover: false }).first;
    const announce =
      first !== undefined && isEvent(first, "RunOutput") && accept(first.data.event)
        ? { event: first.data.event, json: sseDataText(first.data.data), revision: FIRST_OUTPUT_REVISION }
        : undefined;
    return this.tail(runId, "start", accept, signal, announce);
  }

  /** The one tail behind outputs and createdOutputs (not wrapped in another: each layer costs promises per token). */
  private tail(
    runId: string,
    from: bigint | "start",
    accept: (event: string) => boolean,
    signal: AbortSignal,
    announce: RunOutputEvent | undefined,
  ): AsyncIterableIterator<RunOutputEvent> {
    const announced = announce !== undefined;
    const view = this.view(runId);
    const endedAt = view?.stream.ended ? view.stream.revision : undefined;
    // Resumed at or after the end: nothing more to send.
    if (typeof from === "bigint" && typeof endedAt === "bigint" && from >= endedAt) return noOutputs(announce);
    const store = this.ctx.store;
    const output = (e: RecordedEvent): RunOutputEvent | typeof SKIP | Promise<RunOutputEvent> => {
      if (!isEvent(e, "RunOutput")) return SKIP;
      // An output this process wrote goes on as the text the store holds, unparsed (most are tokens).
      const text = dataTextOf(e);
      const stored = text === undefined ? undefined : splitOutputText(text);
      const event = stored ? stored.event : e.data.event;
      if (!accept(event)) return SKIP;
      // Sent already, before the claim wrote it (createdOutputs).
      if (announced && e.revision === FIRST_OUTPUT_REVISION && event === "metadata") return SKIP;
      if (stored) return { event, json: stored.dataText, revision: e.revision };
      // Read back only when written beside the run (too large for one event).
      if (!isLargeValueMarker(e.data.data)) return { event, json: sseDataText(e.data.data), revision: e.revision };
      return chunkOf(store, e.data).then((data) => ({ event, json: sseDataText(data), revision: e.revision }));
    };
    return tailRunMapped(store, runId, from, signal, { map: output, first: announce, atEnd: () => this.waitEnded(runId, signal) });
  }
}

/** The outputs of a run resumed after its end: the announcement, if any, and nothing more. */
async function* noOutputs(announce: RunOutputEvent | undefined): AsyncGenerator<RunOutputEvent> {
  if (announce) yield announce;
}
