/**
 * One WebSocket of the protocol: commands in, responses and events out, on one ordered wire.
 * Subscriptions are in-band (`subscription.subscribe` / `unsubscribe`) and live as long as the
 * socket; the socket follows the thread's runs from the log (from the latest run) and sends each
 * event any subscription wants, in log order. The subscribe response is sent before its first
 * event (the SDK registers the subscription on the response).
 */
import { randomUUID } from "node:crypto";
import type { EventStore } from "../eventstore/types.js";
import { errorResponse, type ProtocolCommand, type ProtocolResponse } from "./commands.js";
import { EVENTS_PER_LOG_EVENT, matchesFilter, seqOf, type EventFilter, type ProtocolEvent } from "./log-events.js";
import { filterOfParams } from "./subscription-params.js";
import { replayedEventCount } from "./thread-feed.js";
import { subscribe, type Subscriber } from "./subscriber.js";
import { describeViolation, findLimitViolation, REQUEST_LIMITS } from "../util/json-limits.js";

export interface WsSessionDeps {
  store: EventStore;
  threadId: string;
  /** Writes one JSON message on the socket (awaits the socket's buffer when it is full). */
  send(message: ProtocolResponse | ProtocolEvent): Promise<void>;
  /** The thread commands (run.start, input.respond, state.get, agent.getTree). */
  command(command: ProtocolCommand): Promise<ProtocolResponse>;
  /** `threads:read` for this socket's caller. */
  authorize(): Promise<void>;
}

/** Whether an event is for any of the socket's subscriptions. */
const anyOf = (filters: Iterable<EventFilter>) => (event: ProtocolEvent) => [...filters].some((f) => matchesFilter(f, event));

export class WsSession {
  private readonly filters = new Map<string, EventFilter>();
  /** The socket's one feed: events go out in log order, whichever subscriptions they are for. */
  private feed: Subscriber | undefined;
  /** Without `since`: the run the newest subscription's replay count started at, where the restarted feed starts. */
  private fromRun: string | undefined;
  private closed = false;
  /**
   * Open except while a subscribe is answered: the feed's events wait here meanwhile, so none goes out
   * between a `subscription.subscribe` and its answer. The SDK sends its subscribes together after
   * `run.start`; were the run's terminal lifecycle (for an earlier subscription) sent before a later
   * one's answer, the SDK would end that later subscription with it unseen (`await thread.values`
   * resolving undefined) whenever answering takes longer than the run (reads of a remote log).
   */
  private gate: Promise<void> = Promise.resolve();

  constructor(private readonly deps: WsSessionDeps) {}

  /** One text frame from the client. */
  async onMessage(text: string): Promise<void> {
    let payload: unknown;
    try {
      payload = JSON.parse(text);
    } catch {
      await this.deps.send(errorResponse(null, "invalid_argument", "Protocol commands must be valid JSON."));
      return;
    }
    const tooDeep = findLimitViolation(payload, REQUEST_LIMITS, "frame");
    if (tooDeep) {
      const id = (payload as { id?: unknown }).id;
      await this.deps.send(errorResponse(typeof id === "number" && Number.isInteger(id) ? id : null, "invalid_argument", describeViolation(tooDeep)));
      return;
    }
    const p = payload as Partial<ProtocolCommand> | null;
    if (!p || typeof p !== "object" || typeof p.id !== "number" || !Number.isInteger(p.id) || p.id < 0 || typeof p.method !== "string") {
      await this.deps.send(errorResponse(null, "invalid_argument", "Protocol commands must include an integer id and string method."));
      return;
    }
    const command = p as ProtocolCommand;
    const params = command.params && typeof command.params === "object" ? command.params : {};
    if (command.method === "subscription.subscribe") return this.subscribe(command.id, params);
    if (command.method === "subscription.unsubscribe") {
      const id = params.subscription_id;
      if (typeof id !== "string") return this.deps.send(errorResponse(command.id, "invalid_argument", "subscription.unsubscribe requires a subscription_id."));
      if (!this.filters.delete(id)) return this.deps.send(errorResponse(command.id, "no_such_subscription", `Unknown subscription: ${id}`));
      await this.deps.send({ type: "success", id: command.id, result: {} });
      return this.restartFeed();
    }
    await this.deps.send(await this.deps.command(command));
  }

  private async subscribe(id: number, params: Record<string, unknown>): Promise<void> {
    const filter = filterOfParams(params);
    if (typeof filter === "string") return this.deps.send(errorResponse(id, "invalid_argument", filter));
    let open!: () => void;
    this.gate = new Promise((resolve) => (open = resolve));
    try {
      try {
        await this.deps.authorize();
      } catch (error) {
        return await this.deps.send(errorResponse(id, "permission_denied", error instanceof Error ? error.message : String(error)));
      }
      if (this.closed) return;
      const subscriptionId = randomUUID();
      // What the feed started below replays for this subscription: the events in the log now.
      const head = seqOf(await this.deps.store.headPosition(), EVENTS_PER_LOG_EVENT - 1);
      const replayed = await replayedEventCount(this.deps.store, this.deps.threadId, filter, head);
      if (this.closed) return;
      this.filters.set(subscriptionId, filter);
      // The feed restarted below replays from the run the count started at, so the count holds.
      this.fromRun = replayed.fromRun;
      // The response first: the SDK only routes events to a subscription it knows.
      await this.deps.send({ type: "success", id, result: { subscription_id: subscriptionId, replayed_events: replayed.count } });
    } finally {
      open();
    }
    await this.restartFeed();
  }

  /**
   * The feed again from the latest run, for the subscriptions there are now: a new subscription
   * gets what the run produced so far; the others see those events again, which the SDK drops by
   * `event_id` (as it does when the official server replays its buffer). When a subscription asked
   * for `since`, the feed replays every run after the smallest such seq (each subscription still
   * gets only events after its own `since`; one without gets those runs too).
   */
  private async restartFeed(): Promise<void> {
    const previous = this.feed;
    this.feed = undefined;
    if (previous) {
      previous.stop();
      await previous.done.catch(() => undefined);
    }
    if (this.closed || this.filters.size === 0) return;
    const filters = [...this.filters.values()];
    const matches = anyOf(filters);
    // One feed with a filter per event: the channels of every subscription, any namespace (each subscription's own test follows).
    const channels = [...new Set(filters.flatMap((f) => f.channels))];
    const sinces = filters.flatMap((f) => (f.since === undefined ? [] : [f.since]));
    const feedFilter: EventFilter = sinces.length > 0 ? { channels, since: Math.min(...sinces) } : { channels };
    this.feed = subscribe(
      this.deps.store,
      this.deps.threadId,
      feedFilter,
      this.deps.authorize,
      async (event) => {
        if (!matches(event)) return;
        await this.gate;
        await this.deps.send(event);
      },
      this.fromRun,
    );
  }

  close(): void {
    this.closed = true;
    this.feed?.stop();
    this.feed = undefined;
    this.filters.clear();
  }
}
