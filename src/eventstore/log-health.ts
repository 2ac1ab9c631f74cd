/**
 * What this process knows about its link to the event log, for `/ok`, `/info` and `/metrics`: fed by
 * the store adapter (each call's outcome, each subscription's state) and by the log's consumers
 * (a read model that stopped). Holds one entry per open subscription and per named consumer, no more.
 */

export type ConnectionState = "connected" | "disconnected";
export type SubscriptionState = "catching_up" | "live" | "reconnecting" | "stopped";

/** One subscription as the adapter reports it. Named subscriptions are listed; unnamed ones (SSE tails) only counted. */
export class SubscriptionHealth {
  state: SubscriptionState = "catching_up";
  /** Cursor of the last event delivered or examined (stream revision or `$all` position). */
  position: bigint | undefined;
  /** Events received from the log, not yet taken by the consumer. */
  buffered = 0;
  /** Times it re-subscribed after a drop. */
  resubscribes = 0;
  lastError: string | undefined;

  constructor(
    readonly name: string | undefined,
    private readonly release: (s: SubscriptionHealth) => void,
  ) {}

  closed(): void {
    this.release(this);
  }
}

export interface HealthVerdict {
  ok: boolean;
  reason?: string;
}

export interface LogHealthSnapshot {
  connection: ConnectionState;
  since: Date;
  reconnects: number;
  lastError: string | undefined;
  subscriptions: {
    name: string;
    state: SubscriptionState;
    position: bigint | undefined;
    buffered: number;
    resubscribes: number;
    lastError: string | undefined;
  }[];
  unnamedSubscriptions: number;
  stoppedConsumers: { name: string; reason: string }[];
}

export class LogHealth {
  private connection: ConnectionState = "connected";
  private since = new Date();
  private lastError: string | undefined;
  /** Times the log was reached again after being unreachable. */
  private reconnectCount = 0;
  private readonly subscriptions = new Set<SubscriptionHealth>();
  private readonly stopped = new Map<string, string>();

  constructor(private readonly now: () => Date = () => new Date()) {}

  /** A call to the log succeeded (or a subscription was confirmed). */
  reached(): void {
    if (this.connection === "connected") return;
    this.connection = "connected";
    this.since = this.now();
    this.reconnectCount++;
  }

  /** A call to the log failed for want of a connection. */
  unreachable(error: unknown): void {
    this.lastError = messageOf(error);
    if (this.connection === "disconnected") return;
    this.connection = "disconnected";
    this.since = this.now();
  }

  get reconnects(): number {
    return this.reconnectCount;
  }

  get state(): ConnectionState {
    return this.connection;
  }

  subscription(name: string | undefined): SubscriptionHealth {
    const s = new SubscriptionHealth(name, (x) => this.subscriptions.delete(x));
    this.subscriptions.add(s);
    return s;
  }

  /** A consumer of the log (a read model) stopped and cannot serve until it runs again. */
  consumerStopped(name: string, error: unknown): void {
    this.stopped.set(name, messageOf(error));
  }

  consumerRunning(name: string): void {
    this.stopped.delete(name);
  }

  /** Whether the process can serve writes now, and if not, why (the first reason found). */
  verdict(): HealthVerdict {
    for (const [name, reason] of this.stopped) return { ok: false, reason: `${name} stopped: ${reason}` };
    if (this.connection === "disconnected") {
      return { ok: false, reason: `event log unreachable since ${this.since.toISOString()}: ${this.lastError ?? "connection lost"}` };
    }
    for (const s of this.subscriptions) {
      if (s.name === undefined) continue;
      if (s.state === "reconnecting" || s.state === "stopped") {
        return { ok: false, reason: `subscription ${s.name} is ${s.state}${s.lastError ? `: ${s.lastError}` : ""}` };
      }
    }
    return { ok: true };
  }

  snapshot(): LogHealthSnapshot {
    const named = [...this.subscriptions].filter((s): s is SubscriptionHealth & { name: string } => s.name !== undefined);
    return {
      connection: this.connection,
      since: this.since,
      reconnects: this.reconnectCount,
      lastError: this.lastError,
      subscriptions: named.map((s) => ({
        name: s.name,
        state: s.state,
        position: s.position,
        buffered: s.buffered,
        resubscribes: s.resubscribes,
        lastError: s.lastError,
      })),
      unnamedSubscriptions: this.subscriptions.size - named.length,
      stoppedConsumers: [...this.stopped].map(([name, reason]) => ({ name, reason })),
    };
  }
}

/**
 * How far a subscription is behind the log's head, in positions: 0 when it is live with nothing
 * waiting for its consumer (it has all the server sent), otherwise head − its cursor.
 */
export function subscriptionLag(s: { state: SubscriptionState; position: bigint | undefined; buffered: number }, head: bigint): bigint {
  if (s.state === "live" && s.buffered === 0) return 0n;
  const at = s.position ?? -1n;
  return head > at ? head - at : 0n;
}

function messageOf(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).replace(/\s+/g, " ").slice(0, 300);
}
