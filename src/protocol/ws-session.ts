/**
 * One WebSocket of the protocol: commands in, responses and events out, on one ordered wire.
 * Subscriptions are in-band (`subscription.subscribe` / `unsubscribe`) and live as long as the
 * socket; each one follows the thread's runs from the log (from the latest run), so a subscribe
 * replays what that run produced so far, then goes live. The subscribe response is sent before
 * its first event (the SDK registers the subscription on the response).
 */
import { randomUUID } from "node:crypto";
import type { EventStore } from "../eventstore/types.js";
import { errorResponse, type ProtocolCommand, type ProtocolResponse } from "./commands.js";
import { SUPPORTED_CHANNELS } from "@langchain/langgraph/stream";
import type { EventFilter, ProtocolEvent } from "./log-events.js";
import { subscribe, type Subscriber } from "./subscriber.js";

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

const isChannel = (value: unknown): value is string => typeof value === "string" && ((SUPPORTED_CHANNELS as ReadonlySet<string>).has(value) || value.startsWith("custom:"));

/** `subscription.subscribe` params → a filter, or why not. */
export function filterOfParams(params: Record<string, unknown>): EventFilter | string {
  const channels = params.channels;
  if (!Array.isArray(channels) || channels.length === 0) return "subscription.subscribe requires a non-empty channels array.";
  if (!channels.every(isChannel)) return "subscription.subscribe received an unsupported channel.";
  const filter: EventFilter = { channels };
  const namespaces = params.namespaces;
  if (Array.isArray(namespaces) && namespaces.every((ns) => Array.isArray(ns) && ns.every((s) => typeof s === "string"))) filter.namespaces = namespaces as string[][];
  if (typeof params.depth === "number" && Number.isInteger(params.depth) && params.depth >= 0) filter.depth = params.depth;
  return filter;
}

export class WsSession {
  private readonly subscriptions = new Map<string, Subscriber>();
  private closed = false;

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
      const subscriber = this.subscriptions.get(id);
      if (!subscriber) return this.deps.send(errorResponse(command.id, "no_such_subscription", `Unknown subscription: ${id}`));
      this.subscriptions.delete(id);
      subscriber.stop();
      return this.deps.send({ type: "success", id: command.id, result: {} });
    }
    await this.deps.send(await this.deps.command(command));
  }

  private async subscribe(id: number, params: Record<string, unknown>): Promise<void> {
    const filter = filterOfParams(params);
    if (typeof filter === "string") return this.deps.send(errorResponse(id, "invalid_argument", filter));
    try {
      await this.deps.authorize();
    } catch (error) {
      return this.deps.send(errorResponse(id, "permission_denied", error instanceof Error ? error.message : String(error)));
    }
    if (this.closed) return;
    const subscriptionId = randomUUID();
    // The response first: the SDK only routes events to a subscription it knows.
    await this.deps.send({ type: "success", id, result: { subscription_id: subscriptionId } });
    const subscriber = subscribe(this.deps.store, this.deps.threadId, filter, this.deps.authorize, (event) => this.deps.send(event));
    this.subscriptions.set(subscriptionId, subscriber);
    subscriber.done.catch(() => undefined).finally(() => this.subscriptions.delete(subscriptionId));
  }

  close(): void {
    this.closed = true;
    for (const s of this.subscriptions.values()) s.stop();
    this.subscriptions.clear();
  }
}
