/**
 * The run record a run request becomes (pure): its `configurable` merged from the assistant, the
 * thread, the request's headers and body and the authenticated user; when it may start
 * (`after_seconds`); and the `kwargs` the worker executes it with. RunsService does the I/O around
 * it (lookups, writing large values beside the run, the append).
 */
import type { RunRecord } from "./run-record.js";
import { durabilityOf, type RunRequest } from "./run-request.js";
import { isPlainObject, type JsonObject } from "../util/json.js";
import { isoOf } from "../util/time.js";

/** Keys of `configurable` that only the server sets (from the authenticated user), as the official server. */
export const AUTH_CONFIGURABLE_KEYS = ["langgraph_auth_user", "langgraph_auth_user_id", "langgraph_auth_permissions"] as const;

/** The authenticated user a run is created for (custom auth). */
export interface RunAuth {
  user: { identity: string } & JsonObject;
  permissions: readonly string[];
}

/** What the run is assembled from: the request, and what the service looked up or chose for it. */
export interface RunAssembly {
  runId: string;
  threadId: string;
  /** A run without a thread in the path: its thread was made for it. */
  stateless: boolean;
  /** ISO 8601. */
  now: string;
  request: RunRequest;
  assistant: { assistant_id: string; graph_id: string; config: JsonObject; context: JsonObject; metadata: JsonObject };
  thread: { config: JsonObject; metadata: JsonObject };
  /** `configurable` taken from the request's headers (`http.configurable_headers`). */
  headerConfigurable: JsonObject;
  auth?: RunAuth;
  /** The request that created the run (the worker's events name it as their cause). */
  requestId?: string;
  /** Input and command as stored: a large one is a reference to where it was written beside the run. */
  stored: { input: unknown; command?: unknown };
}

const obj = (v: unknown): JsonObject => (isPlainObject(v) ? v : {});

/**
 * The run's `configurable`: assistant < thread < headers < request; the auth keys only from the
 * authenticated user, never from a client or stored config; then the ids the graph runs under.
 */
export function runConfigurable(a: RunAssembly): JsonObject {
  const req = a.request;
  const configurable: JsonObject = {
    ...obj(a.assistant.config.configurable),
    ...obj(a.thread.config.configurable),
    ...a.headerConfigurable,
    ...obj(obj(req.config).configurable),
  };
  for (const key of AUTH_CONFIGURABLE_KEYS) delete configurable[key];
  if (a.auth) {
    configurable.langgraph_auth_user = JSON.parse(JSON.stringify(a.auth.user)) as JsonObject;
    configurable.langgraph_auth_user_id = a.auth.user.identity;
    configurable.langgraph_auth_permissions = [...a.auth.permissions];
  }
  if (a.requestId && configurable.langgraph_request_id === undefined) configurable.langgraph_request_id = a.requestId;
  if (req.checkpoint_id) configurable.checkpoint_id = req.checkpoint_id;
  if (req.checkpoint) {
    for (const [k, v] of Object.entries(req.checkpoint)) if (v !== undefined && v !== null) configurable[k] = v;
  }
  Object.assign(configurable, { run_id: a.runId, thread_id: a.threadId, graph_id: a.assistant.graph_id, assistant_id: a.assistant.assistant_id });
  return configurable;
}

/** When a run may start: `after_seconds` after `now` (its `created_at` then, and `not_before`), else now. */
export function runSchedule(now: string, afterSeconds: number | undefined): { createdAt: string; notBefore?: string } {
  const afterMs = Math.max(0, (afterSeconds ?? 0) * 1000);
  if (afterMs <= 0) return { createdAt: now };
  const at = isoOf(Date.parse(now) + afterMs);
  return { createdAt: at, notBefore: at };
}

/** The stream modes asked for, as a list; `values` when none was named. */
export function streamModesOf(mode: RunRequest["stream_mode"]): string[] {
  return mode === undefined ? ["values"] : Array.isArray(mode) ? [...mode] : [mode];
}

/**
 * The run's metadata: assistant < thread < the run's own graph and assistant < request. The
 * thread's `graph_id` / `assistant_id` name the assistant of its last run until this run is enqueued
 * (RunEnqueued stamps them): the run names its own, as the official server's merged run metadata
 * does (it stamps the thread first), and so does every checkpoint the run writes.
 */
export function runMetadata(a: RunAssembly): JsonObject {
  return {
    ...a.assistant.metadata,
    ...a.thread.metadata,
    graph_id: a.assistant.graph_id,
    assistant_id: a.assistant.assistant_id,
    ...obj(a.request.metadata),
  };
}

/** The whole run record, pending, as RunCreated / RunEnqueued carry it. */
export function assembleRun(a: RunAssembly): RunRecord {
  const req = a.request;
  const requestConfig = obj(req.config);
  const metadata = { ...obj(req.metadata) };
  const config: JsonObject = {
    ...a.assistant.config,
    ...a.thread.config,
    ...requestConfig,
    configurable: runConfigurable(a),
    metadata: { ...obj(requestConfig.metadata), ...metadata },
  };
  const { createdAt, notBefore } = runSchedule(a.now, req.after_seconds);
  const kwargs: RunRecord["kwargs"] = {
    input: a.stored.input,
    config,
    context: { ...a.assistant.context, ...obj(req.context) },
    stream_mode: streamModesOf(req.stream_mode),
    temporary: a.stateless && (req.on_completion ?? "delete") === "delete",
    subgraphs: req.stream_subgraphs ?? false,
    resumable: req.stream_resumable ?? false,
  };
  if (a.stored.command !== undefined) kwargs.command = a.stored.command;
  if (req.interrupt_before !== undefined) kwargs.interrupt_before = req.interrupt_before;
  if (req.interrupt_after !== undefined) kwargs.interrupt_after = req.interrupt_after;
  if (req.webhook !== undefined) kwargs.webhook = req.webhook;
  if (req.feedback_keys !== undefined) kwargs.feedback_keys = req.feedback_keys;
  if (req.on_disconnect !== undefined) kwargs.on_disconnect = req.on_disconnect;
  if (notBefore !== undefined) kwargs.not_before = notBefore;
  const durability = durabilityOf(req);
  if (durability !== undefined) kwargs.durability = durability;
  return {
    run_id: a.runId,
    thread_id: a.threadId,
    assistant_id: a.assistant.assistant_id,
    created_at: createdAt,
    updated_at: createdAt,
    status: "pending",
    metadata: runMetadata(a),
    multitask_strategy: req.multitask_strategy ?? "enqueue",
    kwargs,
  };
}
