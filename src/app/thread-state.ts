import type { RunnableConfig } from "@langchain/core/runnables";
import type { StateSnapshot } from "@langchain/langgraph";
import type { AppContext } from "./context.js";
import { getThread, threadState } from "./threads.js";
import { findAssistant } from "./assistants.js";
import { externalizeIfLarge } from "../eventstore/large-values.js";
import { THREAD_VALUES_STREAM_PREFIX, decideUpdateThreadState, threadIsBusy, threadStream } from "../domain/threads.js";
import { isPlainObject, type JsonObject } from "../domain/json.js";
import { conflict, notFound, precondition } from "../domain/errors.js";
import { toWire } from "../runtime/wire.js";
import type { CompiledGraph } from "../runtime/graphs.js";
import type { Caller } from "./auth/caller.js";
import { authorizeThread } from "./auth/guards.js";

/** Thread state, history and state updates: LangGraph's own view of our checkpoints. */

export interface CheckpointRef {
  checkpoint_id?: string;
  checkpoint_ns?: string;
  checkpoint_map?: JsonObject | null;
}

type WireCheckpoint = { thread_id: string; checkpoint_ns: string; checkpoint_id: string | null; checkpoint_map: unknown };

export const EMPTY_STATE = {
  values: {},
  next: [],
  tasks: [],
  metadata: {},
  created_at: null,
  checkpoint: null,
  parent_checkpoint: null,
  interrupts: [],
};

function checkpointOf(config: RunnableConfig | undefined): WireCheckpoint | null {
  const c = config?.configurable;
  if (!c?.checkpoint_id) return null;
  return { thread_id: c.thread_id, checkpoint_ns: c.checkpoint_ns ?? "", checkpoint_id: c.checkpoint_id, checkpoint_map: c.checkpoint_map ?? null };
}

function isSnapshot(value: unknown): value is StateSnapshot {
  return isPlainObject(value) && "values" in value && "next" in value && "tasks" in value;
}

/**
 * A LangGraph StateSnapshot in the wire shape of reference B.5. The thread's own state carries the
 * Python server's top-level `interrupts`; a subgraph's state nested in a task (`subgraphs=true`)
 * has the official JS shape, without it (its interrupts are on its tasks).
 */
export function snapshotToWire(snapshot: StateSnapshot, nested = false): Record<string, unknown> {
  const tasks = snapshot.tasks.map((task) => ({
    id: task.id,
    name: task.name,
    path: task.path ?? [],
    error: task.error === undefined || task.error === null ? null : String((task.error as Error).message ?? task.error),
    interrupts: toWire(task.interrupts ?? []),
    // A subgraph task (without subgraphs=true): its namespace as LangGraph gives it, `{thread_id,
    // checkpoint_ns}` (the official shape; usable as `checkpoint` to read or update the subgraph).
    checkpoint: task.state && !isSnapshot(task.state) ? (toWire((task.state as RunnableConfig).configurable ?? null) as JsonObject | null) : null,
    state: task.state && isSnapshot(task.state) ? snapshotToWire(task.state, true) : null,
    result: task.result === undefined ? null : toWire(task.result),
  }));
  const wire: Record<string, unknown> = {
    values: toWire(snapshot.values ?? {}),
    next: snapshot.next,
    tasks,
    metadata: toWire(snapshot.metadata ?? {}),
    created_at: snapshot.createdAt ?? null,
    checkpoint: checkpointOf(snapshot.config),
    parent_checkpoint: checkpointOf(snapshot.parentConfig),
  };
  if (!nested) wire.interrupts = tasks.flatMap((t) => t.interrupts as unknown[]);
  return wire;
}

/** `task_id → [{id, value}]` for the thread's `interrupts` field. */
export function interruptsByTask(snapshot: StateSnapshot): JsonObject {
  const out: JsonObject = {};
  for (const task of snapshot.tasks) if (task.interrupts?.length) out[task.id] = toWire(task.interrupts);
  return out;
}

/** Keys of a run's configurable that belong to that run alone, not to the thread's config. */
const PER_RUN_KEYS = ["run_id", "checkpoint_id", "checkpoint_ns", "checkpoint_map"];

/**
 * The config in effect on the thread, which a graph factory is made with (as the official server's
 * `thread.config`): the latest run's config (assistant ⊕ thread ⊕ run), or else the assistant's.
 */
function configInEffect(ctx: AppContext, threadId: string, metadata: JsonObject): JsonObject {
  const [latest] = ctx.readModels.runs.listForThread(threadId, { limit: 1, offset: 0 });
  let config: JsonObject = {};
  if (latest) config = latest.kwargs.config as JsonObject;
  else if (typeof metadata.assistant_id === "string") config = findAssistant(ctx, metadata.assistant_id)?.config ?? {};
  const configurable = { ...(isPlainObject(config.configurable) ? config.configurable : {}) };
  for (const key of PER_RUN_KEYS) delete configurable[key];
  return { ...config, configurable };
}

/** The thread's graph with our checkpointer, or undefined for a thread no graph has run on. */
async function graphOfThread(ctx: AppContext, threadId: string): Promise<{ graph: CompiledGraph; config: RunnableConfig } | undefined> {
  const thread = await getThread(ctx, threadId);
  const graphId = thread.metadata.graph_id;
  if (typeof graphId !== "string" || !ctx.graphs.has(graphId)) return undefined;
  const effective = configInEffect(ctx, thread.thread_id, thread.metadata);
  const { graphs, checkpointer } = await ctx.runtime();
  const graph = await graphs.get(graphId, {
    ...effective,
    configurable: { ...(effective.configurable as JsonObject), thread_id: thread.thread_id, graph_id: graphId },
  });
  graph.checkpointer = checkpointer;
  // Reads and updates address the thread's checkpoints only (not the factory's whole config).
  return { graph, config: { configurable: { thread_id: thread.thread_id, graph_id: graphId } } };
}

function configAt(base: RunnableConfig, ref: CheckpointRef | undefined): RunnableConfig {
  if (!ref) return base;
  // Only the fields the reference has: an absent one (a thread_id left out) keeps the thread's.
  const given = Object.fromEntries(Object.entries(ref).filter(([, v]) => v !== undefined && v !== null));
  return { ...base, configurable: { ...base.configurable, ...given, checkpoint_ns: ref.checkpoint_ns ?? "" } };
}

export async function getThreadState(ctx: AppContext, caller: Caller, threadId: string, options: { subgraphs?: boolean; checkpoint?: CheckpointRef } = {}) {
  await authorizeThread(ctx, caller, "read", threadId, { thread_id: threadId });
  const found = await graphOfThread(ctx, threadId);
  if (!found) return EMPTY_STATE;
  const snapshot = await found.graph.getState(configAt(found.config, options.checkpoint), { subgraphs: options.subgraphs ?? false });
  return snapshotToWire(snapshot);
}

export async function getThreadHistory(
  ctx: AppContext,
  caller: Caller,
  threadId: string,
  options: { limit: number; before?: CheckpointRef; metadata?: JsonObject; checkpoint?: CheckpointRef },
) {
  await authorizeThread(ctx, caller, "read", threadId, { thread_id: threadId });
  const found = await graphOfThread(ctx, threadId);
  if (!found) return [];
  const out: Record<string, unknown>[] = [];
  const history = found.graph.getStateHistory(configAt(found.config, options.checkpoint), {
    limit: options.limit,
    before: options.before ? configAt(found.config, options.before) : undefined,
    filter: options.metadata,
  });
  for await (const snapshot of history) out.push(snapshotToWire(snapshot));
  return out;
}

/** Folds the graph's latest state into the thread read model (values, interrupts, status). */
async function recordThreadState(ctx: AppContext, threadId: string, graph: CompiledGraph, config: RunnableConfig): Promise<void> {
  const snapshot = await graph.getState({ configurable: { thread_id: config.configurable?.thread_id } });
  const update = {
    values: await externalizeIfLarge(ctx.store, THREAD_VALUES_STREAM_PREFIX, threadId, toWire(snapshot.values ?? {})),
    interrupts: interruptsByTask(snapshot),
    next: [...snapshot.next],
  };
  const now = ctx.now();
  await ctx.commands.decide({
    stream: threadStream(threadId),
    load: () => ctx.readModels.threads.load(threadId),
    decide: (s) => decideUpdateThreadState(s, update, now),
  });
}

function assertIdle(ctx: AppContext, threadId: string): void {
  const s = threadState(ctx, threadId);
  if (!s) throw notFound(`Thread with ID ${threadId} not found`);
  if (threadIsBusy(s)) throw conflict("Thread is busy with a running job. Cannot update state.");
}

/** A state update is an update of the thread (`threads:update`), as the official server maps it. */
export async function updateThreadState(
  ctx: AppContext,
  caller: Caller,
  threadId: string,
  body: { values?: unknown; as_node?: string; checkpoint?: CheckpointRef; checkpoint_id?: string },
) {
  await authorizeThread(ctx, caller, "update", threadId, { thread_id: threadId });
  assertIdle(ctx, threadId);
  const found = await graphOfThread(ctx, threadId);
  if (!found) throw precondition("Thread has no graph: run an assistant on it first, or create it with metadata.graph_id");
  const ref = body.checkpoint ?? (body.checkpoint_id ? { checkpoint_id: body.checkpoint_id } : undefined);
  let next: RunnableConfig;
  try {
    next = await found.graph.updateState(configAt(found.config, ref), body.values ?? null, body.as_node);
  } catch (error) {
    throw precondition((error as Error).message);
  }
  await recordThreadState(ctx, threadId, found.graph, found.config);
  // `checkpoint` is the current shape; the Python server also spreads the deprecated
  // `configurable` and `checkpoint_id`, which the SDKs' types still describe.
  const checkpoint = checkpointOf(next);
  return { checkpoint, configurable: checkpoint, checkpoint_id: checkpoint?.checkpoint_id ?? null };
}

export async function applySupersteps(
  ctx: AppContext,
  threadId: string,
  supersteps: { updates: { values?: unknown; command?: unknown; as_node: string }[] }[],
) {
  const found = await graphOfThread(ctx, threadId);
  if (!found) throw precondition("supersteps: the thread needs metadata.graph_id naming a known graph");
  try {
    await found.graph.bulkUpdateState(
      found.config,
      supersteps.map((s) => ({
        updates: s.updates.map((u) => ({ values: u.values, asNode: u.as_node })),
      })),
    );
  } catch (error) {
    throw precondition(`supersteps: ${(error as Error).message}`);
  }
  await recordThreadState(ctx, threadId, found.graph, found.config);
  return getThread(ctx, threadId);
}
