import { ulid } from "ulid";
import type { EventStore, RecordedEvent, Subscription } from "../eventstore/types.js";
import { CommandPipeline } from "../commands/pipeline.js";
import { RUN_STREAM_PREFIX } from "../domain/runs.js";
import {
  WEBHOOK_STREAM_PREFIX,
  attemptEvents,
  decideWebhookClaim,
  deliveryIdOf,
  deliveryKey,
  deliveryRunEnded,
  webhookStream,
  type Delivery,
} from "../domain/webhooks.js";
import { pushHeaders } from "../domain/a2a-push.js";
import { isEvent } from "../domain/event-of.js";
import type { ReadModels } from "../read-models/all.js";
import type { WebhookUrlPolicy } from "../langgraph-config.js";
import { webhookBody } from "./body.js";
import { withValuesResolved } from "../eventstore/large-values.js";
import { DELIVERY_ID_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, signWebhook } from "./signing.js";
import { checkWebhookUrlResolved, type Resolver } from "./url-policy.js";
import { classifyAttempt, type AttemptResult, type RetryPolicy } from "./retry.js";
import type { WebhookSender } from "./sender.js";
import { isoOf } from "../util/time.js";
import type { Clock } from "../context/clock.js";
import { WakeLoop } from "../context/wake-loop.js";
import { isPoison } from "../read-models/quarantine.js";

/** The subscriber name of the dispatcher's quarantine records. */
export const WEBHOOKS_SUBSCRIBER = "webhooks";

export interface DispatcherOptions {
  store: EventStore;
  readModels: ReadModels;
  policy: WebhookUrlPolicy;
  retry: RetryPolicy;
  send: WebhookSender;
  /** `webhooks.headers` with their `${{ env.VAR }}` values resolved. */
  headers: Record<string, string>;
  /** `WEBHOOK_SECRET`: adds a timestamp header and an HMAC-SHA256 signature. */
  secret?: string;
  allowedFields?: readonly string[];
  /** Deliveries in flight at once. */
  concurrency: number;
  /** How long a claim holds (longer than one attempt's total timeout). */
  leaseMs: number;
  /** Whether claims of other owners found at start are dead (single-process SQLite store). */
  exclusiveStore: boolean;
  /** Where relative webhook URLs (`/my-route`) go: this server's own base URL. */
  selfUrl?: () => string | undefined;
  resolver?: Resolver;
  owner?: string;
  /** The time line of the log's timestamps (a run's `ended_at` is when its delivery falls due). */
  clock: Clock;
  log?: (message: string) => void;
  /** Told of every attempt's outcome (for /metrics); `sinceEndedSeconds` is from the run's end to a delivery. */
  onAttempt?: (outcome: AttemptOutcome, attemptSeconds: number, sinceEndedSeconds?: number) => void;
  /** The body of an A2A push delivery (the task as its run ended; undefined: the task is gone). */
  pushBody?: (d: Delivery) => Promise<string | undefined>;
}

export type AttemptOutcome = "delivered" | "retry" | "failed";

// A caught-up A2A push end makes a delivery due without a RunEnded.
const WAKE_TYPES = new Set(["WebhookClaimed", "WebhookAttempted", "WebhookDelivered", "WebhookFailed", "A2APushRunEndCaughtUp"]);

/**
 * Sends the webhooks of ended runs, driven by the log: the webhooks read model (fed by the
 * read-model store's catch-up subscription, whose position is persisted with the rows) says which
 * deliveries are due; with a shared store each attempt is first claimed with an expected revision
 * on `webhook-{run_id}`, so exactly one process sends it; its outcome is then appended. It wakes when an event makes a
 * delivery due and by one timer at the next due time, never by polling. Attempts run concurrently
 * up to a bound, so a slow receiver holds only its own slot.
 *
 * A delivery whose attempt throws because of what the log holds for it (a row or a run's values its
 * code cannot handle) is quarantined under `webhook-{key}` and left out of the due deliveries from
 * then on, instead of being attempted again in a loop; an event it cannot handle is skipped.
 */
export class WebhookDispatcher {
  readonly owner: string;
  /** Attempts this process claimed in the log, and claims the log refused because another process's was there first (shared store only). */
  readonly stats = { claimed: 0, lost: 0 };
  private readonly model: ReadModels["webhooks"];
  private readonly loop: WakeLoop;
  private readonly inflight = new Map<string, AbortController>();
  private readonly done = new Set<Promise<void>>();
  private unsubscribe: (() => void) | undefined;
  private committedEnds: Subscription | undefined;
  private stopping = false;
  /** Owners whose claims are dead (exclusive store: every owner but us, at start). */
  private takeover: boolean;

  private readonly commands: CommandPipeline;

  constructor(private readonly o: DispatcherOptions) {
    this.commands = new CommandPipeline(o.store, o.readModels.runner);
    this.owner = o.owner ?? `webhooks-${ulid()}`;
    this.model = o.readModels.webhooks;
    this.takeover = o.exclusiveStore;
    this.loop = new WakeLoop({ clock: o.clock, pass: () => this.startWhatIsDue(), onError: (error) => o.log?.(`webhooks: ${(error as Error).message}`) });
  }

  private nowMs(): number {
    return this.o.clock.now();
  }

  private nowIso(): string {
    return isoOf(this.o.clock.now());
  }

  get inFlight(): number {
    return this.inflight.size;
  }

  start(): void {
    this.unsubscribe = this.o.readModels.runner.onApplied((event) => {
      if (event.type === "RunEnded") {
        const runId = event.streamId.slice(RUN_STREAM_PREFIX.length);
        this.startNow(runId);
        for (const push of this.model.pushesOfRun(runId)) this.startNow(deliveryKey(push));
      } else if (WAKE_TYPES.has(event.type)) this.loop.wake();
    }, WEBHOOKS_SUBSCRIBER);
    if (this.o.exclusiveStore) this.followCommittedEnds();
    if (this.takeover) {
      // A single-process store: claims open at start belong to a process that died; retake them now.
      for (const d of this.model.sending()) if (d.owner !== this.owner && !this.isQuarantined(d)) this.launch(d, true);
    }
    void this.loop.run();
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.unsubscribe?.();
    await this.committedEnds?.close();
    await this.loop.stop();
    for (const c of this.inflight.values()) c.abort(new Error("server shutting down"));
    await Promise.allSettled([...this.done]);
  }

  /** A run just ended: its delivery (by key) starts in this turn of the event loop when a slot is free (latency). */
  private startNow(key: string): void {
    if (this.stopping) return;
    if (this.inflight.size >= this.o.concurrency || this.inflight.has(key)) return this.loop.wake();
    const d = this.model.get(key);
    if (!d || this.isQuarantined(d)) return; // no webhook, or one given up on
    if (this.dueNow(d)) this.launch(d, false);
    else this.loop.wake();
  }

  /**
   * Latency, single-process store: a run's end is taken from the log as its commit lands, a turn of
   * the event loop before the read models have folded it. The delivery is the read model's row with
   * that one event folded in (the same pure fold). Whatever this path skips (a row not there yet, a
   * run never started, no free slot) the read-model path above still starts; the in-flight set keeps
   * one attempt per delivery, and an attempt frees its slot only once the row shows its outcome.
   */
  private followCommittedEnds(): void {
    const subscription = this.o.store.subscribeToAll({
      fromPosition: "end",
      filter: { streamPrefixes: [RUN_STREAM_PREFIX], eventTypes: ["RunEnded"] },
      name: "webhooks-run-ends",
    });
    this.committedEnds = subscription;
    void (async () => {
      for await (const item of subscription) {
        if (item.kind !== "event") continue;
        try {
          this.startOnCommittedEnd(item.event);
        } catch (error) {
          // An end this path cannot read: the read-model path above still sees the delivery.
          this.o.readModels.runner.quarantine.tryRecord(WEBHOOKS_SUBSCRIBER, item.event, error);
        }
      }
    })().catch((error: unknown) => {
      if (!this.stopping) this.o.log?.(`webhooks: following run ends: ${(error as Error).message}`);
    });
  }

  private startOnCommittedEnd(event: RecordedEvent): void {
    // The subscription holds RunEnded events only.
    if (this.stopping || !isEvent(event, "RunEnded") || this.inflight.size >= this.o.concurrency) return;
    const key = event.streamId.slice(RUN_STREAM_PREFIX.length);
    if (this.inflight.has(key)) return;
    const row = this.model.get(key);
    if (!row || row.push || row.ended || row.status !== "waiting" || !row.run_started_at) return;
    const d = deliveryRunEnded(row, event.data);
    if (this.dueNow(d) && !this.isQuarantined(d)) this.launch(d, false);
  }

  private dueNow(d: Delivery): boolean {
    return d.status === "due" && (d.due_at ?? 0) <= this.nowMs();
  }

  /** Starts what is due, up to the bound; says when the next delivery falls due. */
  private startWhatIsDue(): number | undefined {
    if (this.stopping) return undefined;
    const now = this.nowMs();
    const free = this.o.concurrency - this.inflight.size;
    // Deliveries given up on are never due again (until a rebuild clears the quarantine).
    const quarantined = this.quarantinedKeys();
    if (free > 0) for (const d of this.model.due(now, free, [...this.inflight.keys(), ...quarantined])) this.launch(d, false);
    // Deliveries in flight do not count: their outcome (an event) wakes us, as does a freed slot.
    const next = this.model.nextDue([...this.inflight.keys(), ...quarantined]);
    if (next === undefined || this.inflight.size >= this.o.concurrency) return undefined;
    return Math.max(next, now + 1);
  }

  /** The keys of the deliveries this dispatcher gave up on (few; read from the quarantine table). */
  private quarantinedKeys(): string[] {
    return this.o.readModels.runner.quarantine.streams(WEBHOOKS_SUBSCRIBER, WEBHOOK_STREAM_PREFIX).map((s) => s.slice(WEBHOOK_STREAM_PREFIX.length));
  }

  private isQuarantined(d: Delivery): boolean {
    return this.o.readModels.runner.quarantine.has(WEBHOOKS_SUBSCRIBER, webhookStream(deliveryKey(d)));
  }

  private launch(d: Delivery, takeover: boolean): void {
    const controller = new AbortController();
    this.inflight.set(deliveryKey(d), controller);
    const p = this.attempt(d, takeover, controller.signal)
      .catch((error: unknown) => {
        if (this.stopping) return;
        this.o.log?.(`webhook ${deliveryKey(d)}: ${(error as Error).stack ?? String(error)}`);
        // Attempting it again would fail the same way (and at once: a loop): it is left out from now on.
        if (isPoison(error)) this.o.readModels.runner.quarantine.tryRecord(WEBHOOKS_SUBSCRIBER, { streamId: webhookStream(deliveryKey(d)) }, error);
      })
      .finally(() => {
        this.inflight.delete(deliveryKey(d));
        this.done.delete(p);
        this.loop.wake();
      });
    this.done.add(p);
  }

  /** Claim, send, record. Losing the claim (another process won) is normal and silent. */
  private async attempt(d: Delivery, takeover: boolean, signal: AbortSignal): Promise<void> {
    const claim = decideWebhookClaim(d, { owner: this.owner, now: this.nowIso(), nowMs: this.nowMs(), leaseMs: this.o.leaseMs, takeover });
    if (!claim.ok) return;
    // A shared store needs the claim in the log before sending, so that one process sends. A
    // single-process store is claimed by this process alone (the in-flight set keeps one attempt
    // per delivery): its claim goes into the log with the outcome, one commit instead of two
    // before the receiver hears anything. A crash mid-send means sending again: at least once either way.
    let revision: bigint | "no_stream" = d.revision;
    let pendingClaim = claim.events;
    if (!this.o.exclusiveStore) {
      const claimed = await this.commands.append({ stream: webhookStream(deliveryKey(d)), events: claim.events, expected: d.revision, onConflict: "lose" });
      if (!claimed) {
        this.stats.lost++;
        return;
      }
      revision = claimed.nextExpectedRevision;
      pendingClaim = [];
      this.stats.claimed++;
    }
    const attempt = claim.attempt;
    const startedAt = this.nowIso();
    const started = performance.now();
    const deliveryId = deliveryIdOf(deliveryKey(d));
    const target = this.targetOf(d.url);
    let result: AttemptResult;
    if (target.ok) {
      const check = target.relative ? { ok: true as const } : await checkWebhookUrlResolved(d.url, this.o.policy, this.o.resolver);
      if (!check.ok) {
        result = { error: check.detail, final: true };
      } else {
        const body = await this.bodyOf(d);
        if (typeof body !== "string") result = body;
        else result = await this.o.send(target.url, body, { ...this.headersFor(deliveryId, body), ...(d.push ? pushHeaders(d.push) : {}) }, signal);
      }
    } else {
      result = { error: target.detail, final: true };
    }
    if (this.stopping) return; // the claim lapses; the next start (or another process) tries again
    const durationMs = Math.round((performance.now() - started) * 10) / 10;
    const nowMs = this.nowMs();
    const verdict = classifyAttempt(result, attempt, this.o.retry, nowMs);
    const endedMs = d.ended ? Date.parse(d.ended.ended_at) : NaN;
    this.o.onAttempt?.(
      verdict.outcome,
      durationMs / 1000,
      verdict.outcome === "delivered" && Number.isFinite(endedMs) ? Math.max(0, nowMs - endedMs) / 1000 : undefined,
    );
    if (verdict.outcome === "failed" || ("error" in result && result.final))
      this.o.log?.(`webhook ${deliveryKey(d)} attempt ${attempt}: ${"error" in result ? result.error : `HTTP ${result.statusCode}`}`);
    const events = attemptEvents(
      {
        owner: this.owner,
        attempt,
        delivery_id: deliveryId,
        started_at: startedAt,
        duration_ms: durationMs,
        ...("statusCode" in result ? { status_code: result.statusCode } : { error: result.error }),
        outcome: verdict.outcome,
        ...(verdict.outcome === "retry" ? { retry_at: verdict.retryAt } : {}),
      },
      this.nowIso(),
      verdict.outcome === "failed" ? verdict.reason : undefined,
    );
    // The row must show this outcome before the slot frees, or the next pump would see it as still claimed by us.
    // Lost: our lease lapsed and another process took the delivery over; its record stands.
    await this.commands.append({
      stream: webhookStream(deliveryKey(d)),
      events: [...pendingClaim, ...events],
      expected: revision,
      onConflict: "lose",
      waitFor: "fold",
    });
  }

  /** A run webhook's body, or an A2A push's (the task; undefined when it is gone). */
  private async bodyOf(d: Delivery): Promise<string | AttemptResult> {
    if (!d.push) {
      // Final values too large for one event are kept beside the run: the receiver gets the values themselves.
      let ended = d.ended;
      try {
        ended = ended && (await withValuesResolved(this.o.store, ended));
      } catch (error) {
        return { error: `the run's values could not be read: ${(error as Error).message}` }; // retried with backoff
      }
      return JSON.stringify(webhookBody({ ...d, ended }, this.nowIso(), this.o.allowedFields));
    }
    if (!this.o.pushBody) return { error: "A2A push notifications are not served by this process", final: true };
    try {
      return (await this.o.pushBody(d)) ?? { error: "the task no longer exists", final: true };
    } catch (error) {
      return { error: `the task could not be read: ${(error as Error).message}` }; // retried with backoff
    }
  }

  /** The URL to send to: absolute as given (byte for byte), or a path on this server. */
  private targetOf(url: string): { ok: true; url: string; relative: boolean } | { ok: false; detail: string } {
    if (!url.startsWith("/")) return { ok: true, url, relative: false };
    if (this.o.policy.disable_loopback) return { ok: false, detail: "Loopback webhooks are disabled" };
    const base = this.o.selfUrl?.();
    return base ? { ok: true, url: `${base}${url}`, relative: true } : { ok: false, detail: "Loopback webhooks need the server's own address" };
  }

  private headersFor(deliveryId: string, body: string): Record<string, string> {
    const headers: Record<string, string> = { ...this.o.headers, "content-type": "application/json", [DELIVERY_ID_HEADER]: deliveryId };
    if (this.o.secret) {
      const timestamp = String(Math.floor(this.nowMs() / 1000));
      headers[TIMESTAMP_HEADER] = timestamp;
      headers[SIGNATURE_HEADER] = signWebhook(this.o.secret, timestamp, body);
    }
    return headers;
  }
}
