/**
 * LangGraph wraps a run's store in an AsyncBatchedStore, whose queue is drained by a loop that
 * sleeps `setTimeout(0)` (at least 1 ms) between looks for as long as the run lasts, whether or not
 * the graph touches the store: under load one timer per running run per millisecond. Installed once
 * with the graph runtime, this drains the queue when an operation is enqueued instead: what one
 * turn of the event loop enqueues goes to the store in one batch (as before), batches in order, and
 * nothing runs while nothing is asked. Left alone if the class does not have the shape it expects.
 * A project's graphs may run on their own copy of LangGraph: each copy's class is patched (see
 * ../graph-runtime.ts), which is why the class can be passed in.
 */
import { AsyncBatchedStore, type Operation } from "@langchain/langgraph-checkpoint";

interface Queued {
  operation: Operation;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/** The fields of AsyncBatchedStore this relies on (LangGraph's own). */
interface Internals {
  store: { batch(operations: Operation[]): Promise<unknown[]> };
  queue: Map<number, Queued>;
  nextKey: number;
  running: boolean;
  processingTask: Promise<void> | null;
}

const INSTALLED = Symbol.for("agent-server.batched-store-on-demand");
const SCHEDULED = Symbol("drain scheduled");

type Drained = Internals & { [SCHEDULED]?: boolean };

/** Whether a copy of AsyncBatchedStore drains on demand (this module patched it). */
export function drainsOnDemand(batchedStore: { prototype: object }): boolean {
  return (batchedStore.prototype as Record<symbol, unknown>)[INSTALLED] === true;
}

/**
 * Makes every AsyncBatchedStore (of the given copy of the class; the server's own by default)
 * drain on demand; true when installed (now or before).
 */
export function drainBatchedStoresOnDemand(batchedStore: { prototype: object } = AsyncBatchedStore): boolean {
  const proto = batchedStore.prototype as Record<string | symbol, unknown>;
  if (proto[INSTALLED]) return true;
  const expected = ["start", "stop", "enqueueOperation", "processBatchQueue"];
  if (!expected.every((name) => typeof proto[name] === "function")) return false;
  proto.start = function start(this: Drained): void {
    this.running = true;
  };
  proto.stop = async function stop(this: Drained): Promise<void> {
    this.running = false;
    await this.processingTask;
  };
  proto.enqueueOperation = function enqueueOperation(this: Drained, operation: Operation): Promise<unknown> {
    return new Promise((resolve, reject) => {
      this.queue.set(this.nextKey++, { operation, resolve, reject });
      scheduleDrain(this);
    });
  };
  proto[INSTALLED] = true;
  return true;
}

/** At the end of this turn, after the batch in flight: one batch of everything queued by then. */
function scheduleDrain(s: Drained): void {
  if (s[SCHEDULED]) return;
  s[SCHEDULED] = true;
  setImmediate(() => {
    s[SCHEDULED] = false;
    // Batches go to the store one after the other: what was queued while one ran goes in the next.
    const previous = s.processingTask;
    s.processingTask = previous ? previous.then(() => drain(s)) : drain(s);
  });
}

async function drain(s: Drained): Promise<void> {
  const batch = [...s.queue.values()];
  s.queue.clear();
  if (batch.length === 0) return;
  try {
    const results = await s.store.batch(batch.map((q) => q.operation));
    batch.forEach((q, i) => q.resolve(results[i]));
  } catch (error) {
    for (const q of batch) q.reject(error);
  }
}
