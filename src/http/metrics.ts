import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { FastifyPluginAsync } from "fastify";
import type { StartupTimeline } from "../util/startup-timeline.js";
import type { EventStore } from "../eventstore/types.js";
import type { ReadModels } from "../read-models/all.js";
import type { AttemptOutcome } from "../webhooks/dispatcher.js";
import { subscriptionLag, type LogHealth } from "../eventstore/log-health.js";
import { READ_MODELS_SUBSCRIPTION } from "../read-models/health.js";

/** Work that processes sharing a log claim with an expected revision (one wins, the others are refused). */
export type ClaimKind = "run" | "cron" | "webhook";

/** A claimer's counts: claims it appended, and claims the log refused because another process's came first. */
export interface ClaimCounts {
  won: number;
  lost: number;
}

/** The server's Prometheus metrics (one registry per server: several may share a process in tests). */
export class ServerMetrics {
  readonly registry = new Registry();
  readonly appendSeconds: Histogram;
  readonly appendFailures: Counter;
  readonly webhookAttempts: Counter;
  readonly webhookAttemptSeconds: Histogram;
  readonly webhookDeliverySeconds: Histogram;
  /** Webhook attempts this process has in flight (set by the dispatcher's owner). */
  webhooksInFlight: () => number = () => 0;
  /** Runs this process's worker executes now (set by the server once the worker is built). */
  runsExecuting: () => number = () => 0;
  /** Descriptors of the listening socket accepting new connections now (set by the server; see ACCEPTS_PER_TURN). */
  acceptingDescriptors: () => number = () => 1;
  /** Open SSE streams (run streams and joins), counted by the run routes. */
  openStreams = 0;
  /** The claimers of this process (set by the server once they are built); read at scrape time. */
  claims: Partial<Record<ClaimKind, () => ClaimCounts>> = {};
  /** The owner id each claimer of this process writes into its claims (the audit trail names them). */
  claimOwners: Partial<Record<ClaimKind, string>> = {};
  /** The embedded log's WAL syncs so far (set by the server; undefined for EventStoreDB, which syncs on its own). */
  walSyncs: () => { count: number; seconds: number } | undefined = () => undefined;

  constructor(startup?: StartupTimeline) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    if (startup) {
      new Gauge({
        name: "agent_server_startup_phase_seconds",
        labelNames: ["phase"],
        registers,
        help: "Time each start-up phase took (modules: from the process start to the server's first line)",
        collect() {
          this.reset();
          for (const p of startup.phases()) this.set({ phase: p.phase }, p.ms / 1000);
        },
      });
    }
    this.appendSeconds = new Histogram({
      name: "agent_server_append_seconds",
      help: "Latency of appends to the event log",
      registers,
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    });
    this.appendFailures = new Counter({ name: "agent_server_append_failures_total", help: "Appends the event log refused (conflicts included)", registers });
    this.webhookAttempts = new Counter({
      name: "agent_server_webhook_attempts_total",
      labelNames: ["outcome"],
      registers,
      help: "Webhook attempts of this process by outcome: delivered, retry (will be tried again), failed (given up or refused)",
    });
    for (const outcome of ["delivered", "retry", "failed"] satisfies AttemptOutcome[]) this.webhookAttempts.inc({ outcome }, 0);
    this.webhookAttemptSeconds = new Histogram({
      name: "agent_server_webhook_attempt_seconds",
      help: "Duration of one webhook attempt (policy check, connect, send, answer)",
      registers,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    });
    const claims = () => Object.entries(this.claims).map(([kind, counts]) => ({ kind, ...counts() }));
    new Counter({
      name: "agent_server_claims_won_total",
      help: "Claims (run, cron tick, webhook attempt) this process appended",
      labelNames: ["kind"],
      registers,
      collect() {
        this.reset();
        for (const c of claims()) this.inc({ kind: c.kind }, c.won);
      },
    });
    new Counter({
      name: "agent_server_claims_lost_total",
      help: "Claims this process tried that the log refused: another process had claimed the same work first",
      labelNames: ["kind"],
      registers,
      collect() {
        this.reset();
        for (const c of claims()) this.inc({ kind: c.kind }, c.lost);
      },
    });
    const owners = () => Object.entries(this.claimOwners);
    new Gauge({
      name: "agent_server_claim_owner_info",
      help: "1 for the owner id each claimer of this process writes into the log (which process a claim came from)",
      labelNames: ["kind", "owner"],
      registers,
      collect() {
        this.reset();
        for (const [kind, owner] of owners()) this.set({ kind, owner }, 1);
      },
    });
    this.webhookDeliverySeconds = new Histogram({
      name: "agent_server_webhook_delivery_seconds",
      help: "From a run's end to its webhook's delivery, retries included",
      registers,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5, 30, 60, 300, 900],
    });
  }

  /** The gauges read at scrape time from the read models and the log (nothing to keep in sync). */
  observe(store: EventStore, readModels: ReadModels, health?: LogHealth): void {
    const registers = [this.registry];
    // Read at scrape time (a gauge's collect() gets the gauge as `this`).
    const runsExecuting = () => this.runsExecuting();
    const acceptingDescriptors = () => this.acceptingDescriptors();
    const openStreams = () => this.openStreams;
    const webhooksInFlight = () => this.webhooksInFlight();
    // A scrape while the log is unreachable answers at once, without the gauges that need its head.
    const head = async () => (health?.state === "disconnected" ? undefined : store.headPosition().catch(() => undefined));
    if (health) observeLog(registers, health, head);
    new Gauge({
      name: "agent_server_runs",
      help: "Runs in the read model by status",
      labelNames: ["status"],
      registers,
      collect() {
        this.reset();
        for (const [status, count] of Object.entries(readModels.runs.countByStatus())) this.set({ status }, count);
      },
    });
    new Gauge({
      name: "agent_server_pending_runs",
      help: "Runs waiting for a worker (queue depth)",
      registers,
      collect() {
        this.set(readModels.runs.countByStatus().pending ?? 0);
      },
    });
    new Gauge({
      name: "agent_server_runs_executing",
      help: "Runs this process executes now (the pending and running gauges count every process's)",
      registers,
      collect() {
        this.set(runsExecuting());
      },
    });
    new Gauge({
      name: "agent_server_accepting_descriptors",
      help: "Descriptors of the listening socket accepting new connections now: each accepts one per event-loop turn (more while new clients come in bursts, ACCEPTS_PER_TURN)",
      registers,
      collect() {
        this.set(acceptingDescriptors());
      },
    });
    new Gauge({
      name: "agent_server_sse_streams_open",
      help: "Open server-sent event streams",
      registers,
      collect() {
        this.set(openStreams());
      },
    });
    new Gauge({
      name: "agent_server_webhook_pending_deliveries",
      help: "Webhook deliveries due or being sent, across every process of the store",
      registers,
      collect() {
        this.set(readModels.webhooks.openCount());
      },
    });
    new Gauge({
      name: "agent_server_webhook_attempts_in_flight",
      help: "Webhook attempts this process is sending now",
      registers,
      collect() {
        this.set(webhooksInFlight());
      },
    });
    // rate(seconds) / rate(count) of these totals is the mean.
    const total = (name: string, help: string, read: () => number | undefined) => runningTotal(registers, name, help, read);
    total("agent_server_wal_syncs_total", "Syncs of the embedded log's WAL to disk (responses and subscribers wait for them)", () => this.walSyncs()?.count);
    total("agent_server_wal_sync_seconds_total", "Seconds the WAL syncs took, from start to their report on the event loop", () => this.walSyncs()?.seconds);
    total(
      "agent_server_projection_batches_total",
      "Batches of events folded into the read models (one transaction each)",
      () => readModels.runner.foldStats.batches,
    );
    total("agent_server_projection_events_total", "Events folded into the read models", () => readModels.runner.foldStats.events);
    total("agent_server_projection_batch_seconds_total", "Seconds the read models' fold transactions took", () => readModels.runner.foldStats.seconds);
    new Gauge({
      name: "agent_server_quarantined_entries",
      labelNames: ["subscriber"],
      registers,
      help: "Stored events (or runs, deliveries, crons) a subscriber of the log could not handle and skipped, by subscriber (GET /audit/quarantine lists them; a rebuild folds them again)",
      collect() {
        this.reset();
        // The read models' own count is always exported (0 when nothing is quarantined), so an alert needs no absent().
        const { by_subscriber } = readModels.runner.quarantine.summary();
        for (const [subscriber, count] of Object.entries({ [READ_MODELS_SUBSCRIPTION]: 0, ...by_subscriber })) this.set({ subscriber }, count);
      },
    });
    new Gauge({
      name: "agent_server_projection_lag_events",
      help: "Log head position minus the read models' position",
      registers,
      async collect() {
        const at = await head();
        if (at === undefined) return;
        const applied = readModels.runner.position;
        this.set(Number(at > applied ? at - applied : 0n));
      },
    });
    new Gauge({
      name: "agent_server_log_head_position",
      help: "Position of the last event of the log",
      registers,
      async collect() {
        const at = await head();
        if (at !== undefined) this.set(Number(at));
      },
    });
  }

  /** For the webhook dispatcher. */
  readonly onWebhookAttempt = (outcome: AttemptOutcome, attemptSeconds: number, sinceEndedSeconds?: number) => {
    this.webhookAttempts.inc({ outcome });
    this.webhookAttemptSeconds.observe(attemptSeconds);
    if (sinceEndedSeconds !== undefined) this.webhookDeliverySeconds.observe(sinceEndedSeconds);
  };

  /** For the store wrapper (see recordingPositions). */
  readonly onAppend = (seconds: number, ok: boolean) => {
    this.appendSeconds.observe(seconds);
    if (!ok) this.appendFailures.inc();
  };
}

/** The link to the log: connection state, reconnects, and each named subscription's lag and re-subscriptions. */
function observeLog(registers: Registry[], health: LogHealth, head: () => Promise<bigint | undefined>): void {
  new Gauge({
    name: "agent_server_log_connected",
    help: "1 while the event log answers, 0 while it cannot be reached",
    registers,
    collect() {
      this.set(health.state === "connected" ? 1 : 0);
    },
  });
  runningTotal(registers, "agent_server_log_reconnects_total", "Times the event log was reached again after being unreachable", () => health.reconnects);
  new Gauge({
    name: "agent_server_subscription_live",
    help: "1 while a subscription to the log is live, 0 while it catches up, reconnects or stopped",
    labelNames: ["subscription"],
    registers,
    collect() {
      this.reset();
      for (const s of health.snapshot().subscriptions) this.set({ subscription: s.name }, s.state === "live" ? 1 : 0);
    },
  });
  new Gauge({
    name: "agent_server_subscription_lag_positions",
    help: "How far a subscription is behind the log's head (positions; 0 when live with nothing waiting)",
    labelNames: ["subscription"],
    registers,
    async collect() {
      this.reset();
      const at = await head();
      if (at === undefined) return;
      for (const s of health.snapshot().subscriptions) this.set({ subscription: s.name }, Number(subscriptionLag(s, at)));
    },
  });
  new Counter({
    name: "agent_server_subscription_resubscribes_total",
    help: "Times a subscription re-subscribed after a drop",
    labelNames: ["subscription"],
    registers,
    collect() {
      this.reset();
      for (const s of health.snapshot().subscriptions) this.inc({ subscription: s.name }, s.resubscribes);
    },
  });
}

/** `GET /metrics` in Prometheus' text format (public like /ok: it holds counts, no content). */
export function metricsRoutes(metrics: ServerMetrics): FastifyPluginAsync {
  return async (app) => {
    app.get("/metrics", { schema: { hide: true } }, async (_req, reply) => {
      reply.type(metrics.registry.contentType);
      return metrics.registry.metrics();
    });
  };
}

/** An unlabelled counter read at scrape time from a running total the process keeps (undefined: no sample is set). */
function runningTotal(registers: Registry[], name: string, help: string, read: () => number | undefined): Counter {
  return new Counter({
    name,
    help,
    registers,
    collect() {
      const value = read();
      if (value === undefined) return;
      this.reset();
      this.inc(value);
    },
  });
}
