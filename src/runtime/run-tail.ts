/**
 * A run's own stream read from the log as it is written: what every reader that follows a run
 * (an SSE stream, an A2A task's events, the protocol's thread feed) shares.
 */
import type { EventStore, RecordedEvent, Subscription, SubscriptionItem } from "../eventstore/types.js";
import { isLargeValueMarker, MARKER, resolveLarge } from "../eventstore/large-values.js";
import { runStream } from "../domain/runs.js";

/** What a tail's `map` answers for an event its reader does not get. */
export const SKIP: unique symbol = Symbol("skip");

export interface TailOptions<T> {
  /** Each event of the run to what the reader gets, or SKIP: synchronous but where it must read (a large chunk). */
  map: (event: RecordedEvent) => T | typeof SKIP | Promise<T | typeof SKIP>;
  /** Handed to the reader before the run's events. */
  first?: T;
  /** Awaited when the tail ends, unless its reader left (`signal` aborted), before it reports done. */
  atEnd?: () => Promise<void>;
}

/**
 * The events of `run-{id}` after `from` (exclusive), live, up to and including its RunEnded. Ends
 * early, its subscription closed, when `signal` aborts (a reader that left).
 */
export function tailRun(store: EventStore, runId: string, from: bigint | "start", signal: AbortSignal): AsyncIterableIterator<RecordedEvent> {
  return new RunTail(store, runId, from, signal, { map: (event) => event });
}

/** tailRun with each event mapped (or skipped) in the same step: what a reader that wraps the tail would otherwise pay per event. */
export function tailRunMapped<T>(
  store: EventStore,
  runId: string,
  from: bigint | "start",
  signal: AbortSignal,
  options: TailOptions<T>,
): AsyncIterableIterator<T> {
  return new RunTail(store, runId, from, signal, options);
}

const DONE: IteratorReturnResult<undefined> = Object.freeze({ done: true, value: undefined });

/**
 * The tail as its own async iterator, a small state machine rather than an async generator: an event costs its
 * reader one promise beyond the subscription's, where each generator layer's yield costs three (every token of
 * every stream goes through here). As a generator's, it opens its subscription at the first `next`, and on its
 * end, an error or `return` it lets go of the subscription and the abort listener; `next` is not called again
 * before the last call settled (for await never does).
 */
class RunTail<T> implements AsyncIterableIterator<T> {
  private subscription: Subscription | undefined;
  private items: AsyncIterator<SubscriptionItem> | undefined;
  /** open: reading; ending: the RunEnded was handed out, the next `next` ends; closed: done. */
  private state: "open" | "ending" | "closed" = "open";
  private firstPending: boolean;

  constructor(
    private readonly store: EventStore,
    private readonly runId: string,
    private readonly from: bigint | "start",
    private readonly signal: AbortSignal,
    private readonly options: TailOptions<T>,
  ) {
    this.firstPending = options.first !== undefined;
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<T> {
    return this;
  }

  next(): Promise<IteratorResult<T>> {
    if (this.firstPending) {
      this.firstPending = false;
      return Promise.resolve({ done: false, value: this.options.first as T });
    }
    if (this.state === "closed") return Promise.resolve(DONE);
    if (this.state === "ending") return this.end(true);
    if (this.items === undefined) {
      try {
        this.subscription = this.store.subscribeToStream(runStream(this.runId), { fromRevision: this.from });
      } catch (error) {
        return this.onError(error);
      }
      this.items = this.subscription[Symbol.asyncIterator]();
      this.signal.addEventListener("abort", this.stop, { once: true });
    }
    return this.items.next().then(this.onItem, this.onError);
  }

  return(): Promise<IteratorResult<T>> {
    return this.end(false);
  }

  private readonly stop = (): void => void this.subscription?.close();

  private readonly onItem = (result: IteratorResult<SubscriptionItem>): IteratorResult<T> | Promise<IteratorResult<T>> => {
    // The subscription ends when the reader left (its close) or the store closed: a tail without its RunEnded.
    if (result.done || this.signal.aborted) return this.end(true);
    const item = result.value;
    if (item.kind !== "event") return this.next();
    if (item.event.type === "RunEnded") this.state = "ending";
    let mapped: T | typeof SKIP | Promise<T | typeof SKIP>;
    try {
      mapped = this.options.map(item.event);
    } catch (error) {
      return this.onError(error);
    }
    return mapped instanceof Promise ? mapped.then(this.deliver, this.onError) : this.deliver(mapped);
  };

  private readonly deliver = (mapped: T | typeof SKIP): IteratorResult<T> | Promise<IteratorResult<T>> =>
    mapped === SKIP ? this.next() : { done: false, value: mapped };

  private readonly onError = async (error: unknown): Promise<never> => {
    await this.end(false);
    throw error;
  };

  /** Lets go of the subscription; then, at the run's end (`reached`) and unless the reader left, awaits `atEnd`. */
  private async end(reached: boolean): Promise<IteratorResult<T>> {
    if (this.state === "closed") return DONE;
    this.state = "closed";
    this.firstPending = false;
    this.signal.removeEventListener("abort", this.stop);
    await this.subscription?.close();
    if (reached && !this.signal.aborted && this.options.atEnd) await this.options.atEnd();
    return DONE;
  }
}

/** A run output's chunk: read back when it was too large for one event and written beside the run (see RunStreamWriter). */
export async function chunkOf(store: EventStore, output: { data: unknown }): Promise<unknown> {
  return isLargeValueMarker(output.data) ? await resolveLarge(store, output.data) : output.data;
}

const OUTPUT_TEXT_START = '{"event":"';
const DATA_KEY = '","data":';
/** Where a large chunk's reference lies, it names this key (see isLargeValueMarker): such text is parsed and resolved. */
const LARGE_MARKER_KEY = JSON.stringify(MARKER);

/**
 * A RunOutput's stored JSON text `{"event":"<name>","data":<data>}` taken apart without parsing it: the name,
 * and the text of its data, which JSON.stringify of the parsed data would give again. Undefined for text of
 * another shape (a name with escapes, keys in another order, no data) or data that may hold a large chunk's
 * reference; the caller parses those. RunOutput data has exactly these two keys (its schema is strict).
 */
export function splitOutputText(text: string): { event: string; dataText: string } | undefined {
  if (!text.startsWith(OUTPUT_TEXT_START) || !text.endsWith("}")) return undefined;
  const nameEnd = text.indexOf(DATA_KEY, OUTPUT_TEXT_START.length);
  if (nameEnd < 0) return undefined;
  const event = text.slice(OUTPUT_TEXT_START.length, nameEnd);
  if (event.includes("\\") || event.includes('"')) return undefined;
  const dataText = text.slice(nameEnd + DATA_KEY.length, -1);
  if (dataText.length === 0 || dataText.includes(LARGE_MARKER_KEY)) return undefined;
  return { event, dataText };
}
