import type { RunnableConfig } from "@langchain/core/runnables";
import { Command } from "@langchain/langgraph";
import type { BaseCheckpointSaver, BaseStore } from "@langchain/langgraph-checkpoint";
import type { RunRecord } from "../domain/run-record.js";
import type { RunOutcome } from "../domain/run-rules.js";
import type { CompiledGraph } from "./graphs.js";
import { StreamModeMapper, serializeError, toWire, type SseEvent } from "./stream-modes.js";
import { DEFER_CHECKPOINT_WRITES } from "./checkpoint-codec.js";
import { LANGGRAPH_JS_VERSION } from "../version.js";

export interface GraphSource {
  /** The compiled graph for this graph id (a factory graph is made with the run's config). */
  get(graphId: string, config: RunnableConfig): Promise<CompiledGraph>;
}

/** How the attempt ended (the worker's rules turn it into the run's terminal event). */
export type ExecutionOutcome = RunOutcome;

export interface RunExecution {
  run: RunRecord;
  graphs: GraphSource;
  checkpointer: BaseCheckpointSaver;
  /** The long-term store the graph's nodes get (`config.store`, `getStore()`), attributed to this run. */
  store?: BaseStore;
  signal: AbortSignal;
  /** Continue from the thread's last checkpoint instead of feeding the input again (crash recovery). */
  resume: boolean;
  /** Which execution of the run this is (1 for the first; a run taken over after a crash counts on). */
  attempt?: number;
  /** Called for every SSE event, in order, as the graph produces it. */
  emit(event: SseEvent): void;
}

function inputOf(run: RunRecord, resume: boolean): unknown {
  if (resume) return null;
  const command = run.kwargs.command as { resume?: unknown; update?: unknown; goto?: unknown } | undefined | null;
  if (command) {
    const params: Record<string, unknown> = {};
    if (command.resume !== undefined) params.resume = command.resume;
    if (command.update !== undefined && command.update !== null) params.update = command.update;
    if (command.goto !== undefined && command.goto !== null) params.goto = command.goto;
    return new Command(params as ConstructorParameters<typeof Command>[0]);
  }
  return run.kwargs.input ?? null;
}

/**
 * The keys the official servers add to a run's metadata when they execute it (JS: `streamState` in
 * libs/langgraph-api/src/stream.mts), so graphs, traces and checkpoint metadata see them. Not
 * `langgraph_plan`: this server runs under no LangGraph plan, and naming one would be untrue.
 */
export function executionMetadata(attempt: number, env: Record<string, string | undefined> = process.env): Record<string, unknown> {
  const out: Record<string, unknown> = { run_attempt: attempt, langgraph_version: LANGGRAPH_JS_VERSION, langgraph_host: "self-hosted" };
  // As the official servers: the URL the deployment is reached at, when the operator names it.
  if (env.LANGGRAPH_API_URL) out.langgraph_api_url = env.LANGGRAPH_API_URL;
  return out;
}

/**
 * Runs the assistant's graph for one attempt of a run, emitting its chunks; never throws. Returns
 * once the graph is done: the checkpoint writes the run did not wait for (see
 * DEFER_CHECKPOINT_WRITES) may still be in flight, and the run's end must wait for them or depend
 * on them (the worker does).
 */
export async function executeRun(x: RunExecution): Promise<ExecutionOutcome> {
  const { run, signal } = x;
  const kw = run.kwargs;
  const config = kw.config as RunnableConfig & { recursion_limit?: number };
  const graphId = String(config.configurable?.graph_id ?? "");
  const mapper = new StreamModeMapper(kw.stream_mode, kw.subgraphs);
  let graph: CompiledGraph | undefined;
  /** After an abort: the state the checkpoints hold (the work done so far is kept). */
  const stateValues = async () => {
    try {
      return toWire((await graph?.getState({ configurable: { thread_id: config.configurable?.thread_id } }))?.values);
    } catch {
      return undefined;
    }
  };
  try {
    graph = await x.graphs.get(graphId, config);
    if (graph.checkpointer !== x.checkpointer) graph.checkpointer = x.checkpointer;
    const { recursion_limit, ...rest } = config;
    // Checkpoint metadata names the run (rollback and crash recovery find a run's checkpoints by it),
    // carries the run's metadata (assistant ⊕ thread ⊕ request, as the official server's run config
    // does, so history filters by it), as the Python server does, the scalar configurable values, and
    // what the official servers add when they execute a run (executionMetadata).
    const scalars = Object.entries(config.configurable ?? {}).filter(([k, v]) => !k.startsWith("__") && ["string", "number", "boolean"].includes(typeof v));
    const options: Record<string, unknown> = {
      ...rest,
      // Unless each step's checkpoint must be stored before the next step runs ("sync"), the run's
      // checkpoint writes do not wait for their commits one by one; the worker flushes them before the run ends.
      configurable: kw.durability === "sync" ? rest.configurable : { ...rest.configurable, [DEFER_CHECKPOINT_WRITES]: true },
      metadata: { ...Object.fromEntries(scalars), ...run.metadata, ...(config.metadata ?? {}), ...executionMetadata(x.attempt ?? 1), run_id: run.run_id },
      context: kw.context,
      signal,
      subgraphs: kw.subgraphs,
      streamMode: mapper.libModes(),
    };
    // Protocol (v2) runs: LangGraph's v3 chunks (protocol-shaped messages, checkpoint envelopes) of every namespace.
    if (mapper.protocol) Object.assign(options, { version: "v3", subgraphs: true });
    const nsInChunks = kw.subgraphs || !!mapper.protocol;
    // Per run, not on the shared compiled graph: concurrent runs keep their own attribution.
    if (x.store) options.store = x.store;
    if (recursion_limit !== undefined) options.recursionLimit = recursion_limit;
    if (kw.interrupt_before !== undefined) options.interruptBefore = kw.interrupt_before;
    if (kw.interrupt_after !== undefined) options.interruptAfter = kw.interrupt_after;
    // `exit`: LangGraph writes the final checkpoint only (a crash restarts the run from its input).
    if (kw.durability !== undefined) options.durability = kw.durability;
    const input = inputOf(run, x.resume);
    if (mapper.needsEvents) {
      const events = graph.streamEvents(input, { ...options, version: "v2", runId: run.run_id } as never);
      for await (const event of events as unknown as AsyncIterable<Parameters<StreamModeMapper["fromStreamEvent"]>[0]>) {
        for (const e of mapper.fromStreamEvent(event, run.run_id)) x.emit(e);
      }
    } else {
      const stream = await graph.stream(input, options as never);
      for await (const chunk of stream as AsyncIterable<unknown[]>) {
        const [ns, mode, data] = (nsInChunks ? chunk : [undefined, ...chunk]) as [string[] | undefined, string, unknown];
        for (const e of mapper.fromChunk(ns, mode, data)) x.emit(e);
      }
    }
    if (signal.aborted) return { status: "error", error: serializeError(signal.reason ?? new Error("aborted")), aborted: true, values: await stateValues() };
    if (mapper.interrupted) {
      const state = await graph.getState({ configurable: { thread_id: config.configurable?.thread_id } });
      const interrupts: Record<string, unknown> = {};
      for (const task of state.tasks) interrupts[task.id] = toWire(task.interrupts ?? []);
      // The official servers answer a /wait with the last `values` chunk: the interrupt, unless the state came after it.
      return { status: "interrupted", values: toWire(state.values), interrupts, ...(mapper.lastValuesInterrupt ? {} : { valuesAfterInterrupt: true }) };
    }
    if (mapper.lastValuesWire !== undefined) return { status: "success", values: mapper.lastValuesWire };
    let values = mapper.lastValues;
    if (values === undefined) values = (await graph.getState({ configurable: { thread_id: config.configurable?.thread_id } })).values;
    return { status: "success", values: toWire(values) };
  } catch (error) {
    if (signal.aborted) return { status: "error", error: serializeError(error), aborted: true, values: await stateValues() };
    return { status: "error", error: serializeError(error), aborted: false };
  }
}
