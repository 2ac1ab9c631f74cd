import path from "node:path";
import * as z from "zod";

/** Environment variables every part shares; each has a default that works on a fresh machine. */
const EnvSchema = z.object({
  HOST: z.string().min(1).default("127.0.0.1"),
  PORT: z.coerce.number().int().min(0).max(65535).default(2024),
  DATA_DIR: z.string().min(1).default("./data"),
  EVENTSTORE_URL: z
    .string()
    // The schemes of EventStoreDB and of its new name, KurrentDB (src/eventstore/connection-string.ts maps them).
    .regex(/^\s*(esdb|kurrentdb|kurrent|kdb)(\+discover)?:\/\//i, "must start with esdb://, kurrentdb:// (or kurrent://, kdb://), optionally +discover")
    .optional(),
  /** How long a request may wait for the log (appends and reads retried, read models catching up) before it answers 503 with Retry-After. */
  EVENTSTORE_DEADLINE_MS: z.coerce.number().int().positive().default(10_000),
  LANGGRAPH_API_KEY: z.string().min(1).optional(),
  LANGGRAPH_CONFIG: z.string().optional(),
  LANGGRAPH_JSON: z.string().min(1).default("./langgraph.json"),
  /** Largest accepted request body, bytes. */
  BODY_LIMIT: z.coerce
    .number()
    .int()
    .positive()
    .default(10 * 1024 * 1024),
  /**
   * The most new connections accepted per turn of the event loop (Linux): Node accepts one, so under load a
   * wave of new clients waits in the kernel's queue. Above 1, a helper process hands back that many copies of
   * the listening socket once the server has started; 16 listen at rest, the rest during bursts of new clients.
   */
  ACCEPTS_PER_TURN: z.coerce.number().int().min(1).max(256).default(256),
  /** Runs executed at once by this process. */
  N_JOBS_PER_WORKER: z.coerce.number().int().positive().default(10),
  /** A run still executing after this many seconds is aborted and ends with status `timeout`. */
  BG_JOB_TIMEOUT_SECS: z.coerce.number().positive().default(3600),
  /** How long a run claim holds without renewal; with a shared store (ESDB) a dead process's runs are taken over after it. */
  RUN_LEASE_SECS: z.coerce.number().positive().default(30),
  /** SQLite durability: FULL (default) fsyncs the WAL before anything committed is reported outside the process; NORMAL never fsyncs. */
  SQLITE_SYNCHRONOUS: z.enum(["FULL", "NORMAL"]).default("FULL"),
  /** `all`: every appended event is checked against its schema (the test suite runs so); `lifecycle`: all but the per-step events of runs (checkpoints, pending writes, output chunks). */
  EVENT_SCHEMA_CHECKS: z.enum(["all", "lifecycle"]).default("lifecycle"),
  /** Threads whose folded checkpoints stay in memory; others are re-read from their stream when used. */
  CHECKPOINT_CACHE_THREADS: z.coerce.number().int().positive().default(1000),
  /** Bytes (serialized size) the cached threads' checkpoints may take together. */
  CHECKPOINT_CACHE_BYTES: z.coerce
    .number()
    .int()
    .positive()
    .default(32 * 1024 * 1024),
  /**
   * V8's old generation may grow to (1 + this/100) × the live heap before a full collection; V8's
   * own factor (up to 4× under load) lets the heap of a run burst reach 4× what is live. 0 = V8's own.
   */
  HEAP_GROWING_PERCENT: z.coerce.number().int().min(0).max(400).default(50),
  /** Base URL clients reach the server at (behind a proxy); the agent card advertises it. */
  PUBLIC_URL: z.url().optional(),
  /** Signs webhooks (HMAC-SHA256 of `timestamp.body`) when set. */
  WEBHOOK_SECRET: z.string().min(1).optional(),
  /** Attempts per webhook delivery, first included. */
  WEBHOOK_MAX_ATTEMPTS: z.coerce.number().int().positive().default(8),
  /** Backoff after the first failed attempt (doubles each time, ±20 % jitter) and its ceiling, ms. */
  WEBHOOK_RETRY_BASE_MS: z.coerce.number().int().positive().default(5_000),
  WEBHOOK_RETRY_MAX_MS: z.coerce.number().int().positive().default(300_000),
  /** Webhook deliveries in flight at once per process. */
  WEBHOOK_CONCURRENCY: z.coerce.number().int().positive().default(64),
  WEBHOOK_CONNECT_TIMEOUT_MS: z.coerce.number().int().positive().default(5_000),
  WEBHOOK_TIMEOUT_MS: z.coerce.number().int().positive().default(30_000),
  /** How long a delivery's claim holds (shared store): a dead sender's delivery is taken over after it. Default: the total timeout + 15 s. */
  WEBHOOK_LEASE_MS: z.coerce.number().int().positive().optional(),
  /** Missed cron ticks fired on start: unset = only the latest; N = every missed tick of the last N seconds. */
  CRON_CATCHUP_SECS: z.coerce.number().nonnegative().optional(),
  /** Development mode (as `langgraph dev` sets it): enables POST /internal/truncate and webhooks to loopback / private addresses. */
  LANGGRAPH_DEV: z.enum(["true", "false", "1", "0"]).default("false"),
  /**
   * Reload the graphs when their files (with their local imports), langgraph.json or its .env
   * change. `agent-server dev` turns it on unless set; off otherwise (`start`, tests, main.ts).
   */
  LANGGRAPH_WATCH: z.enum(["true", "false", "1", "0"]).default("false"),
  /** How long an `Idempotency-Key` of a run creation holds: a retry within it returns the same run; after it the key may be used again. */
  IDEMPOTENCY_KEY_TTL_SECS: z.coerce
    .number()
    .positive()
    .default(24 * 3600),
  /** How long reading a graph file's TypeScript types for its schemas may take (official server's variable); past it the runtime's schemas answer. */
  LANGGRAPH_SCHEMA_RESOLVE_TIMEOUT_MS: z.coerce.number().int().positive().default(120_000),
  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("warn"),
  /** Metadata keys sealed with the content when the log is encrypted: comma-separated, or a JSON array. */
  LANGGRAPH_AES_JSON_KEYS: z.string().optional(),
  /** The key vault of the encrypted log (data keys wrapped by the master key); default DATA_DIR/keys.sqlite. */
  LANGGRAPH_KEY_VAULT: z.string().min(1).optional(),
});

export interface Config {
  host: string;
  port: number;
  dataDir: string;
  eventstoreUrl: string | undefined;
  /** EVENTSTORE_DEADLINE_MS: how long a request may wait for an unreachable log before it answers 503. */
  eventstoreDeadlineMs: number;
  apiKey: string | undefined;
  /** Raw LANGGRAPH_CONFIG JSON (per-graph config/context of the default assistants). */
  langgraphConfig: string | undefined;
  langgraphJsonPath: string;
  bodyLimit: number;
  /** ACCEPTS_PER_TURN: the most new connections the server accepts per turn of its event loop (src/http/accept-watchers.ts). */
  acceptsPerTurn: number;
  maxConcurrentRuns: number;
  runTimeoutSecs: number;
  runLeaseSecs: number;
  sqliteSynchronous: "FULL" | "NORMAL";
  /** EVENT_SCHEMA_CHECKS: whether the per-step events of runs are schema-checked on append too. */
  eventSchemaChecks: "all" | "lifecycle";
  checkpointCacheThreads: number;
  checkpointCacheBytes: number;
  /** HEAP_GROWING_PERCENT, applied by the entry point (main.ts) to the whole process. */
  heapGrowingPercent: number;
  logLevel: string;
  /** PUBLIC_URL; unset: the request's host (and X-Forwarded-Proto / -Host). */
  publicUrl: string | undefined;
  webhooks: {
    secret: string | undefined;
    maxAttempts: number;
    retryBaseMs: number;
    retryMaxMs: number;
    concurrency: number;
    connectTimeoutMs: number;
    timeoutMs: number;
    leaseMs: number;
  };
  /** null = fire only the latest missed tick. */
  cronCatchUpSecs: number | null;
  /** LANGGRAPH_SCHEMA_RESOLVE_TIMEOUT_MS: the longest a TypeScript pass over a graph file may run. */
  schemaResolveTimeoutMs: number;
  /** LANGGRAPH_DEV=true: development endpoints (POST /internal/truncate) are served; webhooks may reach loopback / private addresses. */
  devMode: boolean;
  /** LANGGRAPH_WATCH=true: graphs are reloaded when their files, langgraph.json or its .env change. */
  watch: boolean;
  /** IDEMPOTENCY_KEY_TTL_SECS: how long an Idempotency-Key of a run creation holds (default 24 h). */
  idempotencyKeyTtlSecs: number;
  /** Encryption at rest of the log: set when LANGGRAPH_AES_KEY is. */
  encryption?: EncryptionConfig;
}

export interface EncryptionConfig {
  /**
   * LANGGRAPH_AES_KEY and LANGGRAPH_AES_PREVIOUS_KEYS as given: the start-up parses them (src/crypto, which this
   * ground-floor module may not import) and refuses to start on a bad one.
   */
  masterKeyEnv: { LANGGRAPH_AES_KEY?: string; LANGGRAPH_AES_PREVIOUS_KEYS?: string };
  /** LANGGRAPH_AES_JSON_KEYS: metadata keys sealed with the content (the rest of metadata stays searchable). */
  jsonKeys: string[];
  /** LANGGRAPH_KEY_VAULT: the key vault's file. */
  vaultPath: string;
}

export class ConfigError extends Error {
  override name = "ConfigError";
}

/** Unset and empty variables both mean "use the default". */
function definedOnly(env: NodeJS.ProcessEnv): Record<string, string> {
  return Object.fromEntries(Object.entries(env).filter((e): e is [string, string] => !!e[1]));
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = EnvSchema.safeParse(definedOnly(env));
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new ConfigError(`invalid environment variable ${issue.path.join(".")}: ${issue.message}`);
  }
  const e = parsed.data;
  return {
    host: e.HOST,
    port: e.PORT,
    dataDir: path.resolve(e.DATA_DIR),
    eventstoreUrl: e.EVENTSTORE_URL,
    eventstoreDeadlineMs: e.EVENTSTORE_DEADLINE_MS,
    apiKey: e.LANGGRAPH_API_KEY,
    langgraphConfig: e.LANGGRAPH_CONFIG,
    langgraphJsonPath: path.resolve(e.LANGGRAPH_JSON),
    bodyLimit: e.BODY_LIMIT,
    acceptsPerTurn: e.ACCEPTS_PER_TURN,
    maxConcurrentRuns: e.N_JOBS_PER_WORKER,
    runTimeoutSecs: e.BG_JOB_TIMEOUT_SECS,
    runLeaseSecs: e.RUN_LEASE_SECS,
    sqliteSynchronous: e.SQLITE_SYNCHRONOUS,
    eventSchemaChecks: e.EVENT_SCHEMA_CHECKS,
    checkpointCacheThreads: e.CHECKPOINT_CACHE_THREADS,
    checkpointCacheBytes: e.CHECKPOINT_CACHE_BYTES,
    heapGrowingPercent: e.HEAP_GROWING_PERCENT,
    logLevel: e.LOG_LEVEL,
    schemaResolveTimeoutMs: e.LANGGRAPH_SCHEMA_RESOLVE_TIMEOUT_MS,
    publicUrl: e.PUBLIC_URL,
    webhooks: {
      secret: e.WEBHOOK_SECRET,
      maxAttempts: e.WEBHOOK_MAX_ATTEMPTS,
      retryBaseMs: e.WEBHOOK_RETRY_BASE_MS,
      retryMaxMs: e.WEBHOOK_RETRY_MAX_MS,
      concurrency: e.WEBHOOK_CONCURRENCY,
      connectTimeoutMs: e.WEBHOOK_CONNECT_TIMEOUT_MS,
      timeoutMs: e.WEBHOOK_TIMEOUT_MS,
      leaseMs: Math.max(e.WEBHOOK_LEASE_MS ?? e.WEBHOOK_TIMEOUT_MS + 15_000, e.WEBHOOK_TIMEOUT_MS + 100),
    },
    cronCatchUpSecs: e.CRON_CATCHUP_SECS ?? null,
    devMode: e.LANGGRAPH_DEV === "true" || e.LANGGRAPH_DEV === "1",
    watch: e.LANGGRAPH_WATCH === "true" || e.LANGGRAPH_WATCH === "1",
    idempotencyKeyTtlSecs: e.IDEMPOTENCY_KEY_TTL_SECS,
    encryption: encryptionOf(env, e.LANGGRAPH_AES_JSON_KEYS, e.LANGGRAPH_KEY_VAULT, path.resolve(e.DATA_DIR)),
  };
}

function encryptionOf(env: NodeJS.ProcessEnv, jsonKeys: string | undefined, vault: string | undefined, dataDir: string): EncryptionConfig | undefined {
  const masterKeyEnv = { LANGGRAPH_AES_KEY: env.LANGGRAPH_AES_KEY || undefined, LANGGRAPH_AES_PREVIOUS_KEYS: env.LANGGRAPH_AES_PREVIOUS_KEYS || undefined };
  const keys = parseJsonKeys(jsonKeys);
  if (!masterKeyEnv.LANGGRAPH_AES_KEY && !masterKeyEnv.LANGGRAPH_AES_PREVIOUS_KEYS) {
    // Named keys without a master key would stay in clear while the operator believes them sealed.
    if (keys.length > 0) throw new ConfigError("LANGGRAPH_AES_JSON_KEYS is set but LANGGRAPH_AES_KEY is not: set the key the log is encrypted with");
    return undefined;
  }
  return { masterKeyEnv, jsonKeys: keys, vaultPath: path.resolve(vault ?? path.join(dataDir, "keys.sqlite")) };
}

/** `a,b` or `["a","b"]`. */
function parseJsonKeys(text: string | undefined): string[] {
  const trimmed = text?.trim() ?? "";
  if (trimmed === "") return [];
  if (!trimmed.startsWith("[")) return [...new Set(trimmed.split(",").map((k) => k.trim()))].filter((k) => k !== "");
  let value: unknown;
  try {
    value = JSON.parse(trimmed);
  } catch {
    throw new ConfigError(
      'invalid environment variable LANGGRAPH_AES_JSON_KEYS: not valid JSON; expected a comma-separated list or a JSON array of strings, e.g. ["email"]',
    );
  }
  if (!Array.isArray(value) || !value.every((k): k is string => typeof k === "string" && k !== "")) {
    throw new ConfigError('invalid environment variable LANGGRAPH_AES_JSON_KEYS: expected a JSON array of non-empty strings, e.g. ["email"]');
  }
  return [...new Set(value)];
}
