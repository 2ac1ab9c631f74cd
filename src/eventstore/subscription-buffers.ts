/**
 * What catch-up subscriptions hold for consumers that have not pulled it yet: each subscription's own
 * amount (`buffered`), and their sum over the process, with its peak, for health reports and tests.
 */

/** Events a subscription holds that its consumer has not taken; `bytes` (their JSON text) when the store knows it. */
export interface BufferedAmount {
  events: number;
  bytes?: number;
}

/**
 * The most one subscription holds: one page of the log, cut at whichever limit comes first (a single event
 * larger than the byte limit is still a page). The embedded store knows each event's length and applies both;
 * EventStoreDB's client hands over parsed events only, so there the bound is a count.
 */
export const SUBSCRIPTION_BUFFER = { maxEvents: 1000, maxBytes: 256 * 1024 } as const;

/** Live events an EventStoreDB subscription takes ahead of its consumer before it lets go of the live feed. */
export const ESDB_LIVE_BUFFER_EVENTS = 256;

/** The sum over every subscription of the process. */
export class SubscriptionBuffers {
  events = 0;
  bytes = 0;
  peakEvents = 0;
  peakBytes = 0;
  /** Times a subscription dropped its live buffer and went back to reading the log. */
  fellBehind = 0;
  private readonly listeners = new Set<() => void>();

  add(events: number, bytes = 0): void {
    this.events += events;
    this.bytes += bytes;
    if (this.events > this.peakEvents) this.peakEvents = this.events;
    if (this.bytes > this.peakBytes) this.peakBytes = this.bytes;
    if (this.listeners.size > 0) this.changed();
  }

  remove(events: number, bytes = 0): void {
    this.events -= events;
    this.bytes -= bytes;
    if (this.listeners.size > 0) this.changed();
  }

  behind(): void {
    this.fellBehind++;
    if (this.listeners.size > 0) this.changed();
  }

  /** Peaks from now on. */
  resetPeaks(): void {
    this.peakEvents = this.events;
    this.peakBytes = this.bytes;
  }

  /** Resolves once `condition` holds, looked at after every change (no polling). */
  until(condition: () => boolean): Promise<void> {
    if (condition()) return Promise.resolve();
    return new Promise((resolve) => {
      const check = () => {
        if (!condition()) return;
        this.listeners.delete(check);
        resolve();
      };
      this.listeners.add(check);
    });
  }

  private changed(): void {
    for (const listener of [...this.listeners]) listener();
  }
}

export const subscriptionBuffers = new SubscriptionBuffers();

/** A subscription's `buffered`, when its adapter reports one (wrappers may hide it). */
export function bufferedOf(subscription: object): BufferedAmount | undefined {
  return "buffered" in subscription ? (subscription.buffered as BufferedAmount) : undefined;
}
