/**
 * `delay`: the node `wait` waits `delay` milliseconds, taken from the input (`{"delay": 500}`) or
 * else from `config.configurable.delay` (default 0), then replies `waited <ms>ms` (id `ai-<n>`).
 * With `gate` (a file path) in the input it first waits until that file exists: a test holds a run
 * in flight for exactly as long as it needs (test/support/gates.ts), whatever the machine's speed.
 * Both waits are bound to the run's abort signal, so cancelling a run ends it at once.
 */
import { existsSync, watch } from "node:fs";
import path from "node:path";
import { setTimeout as wait } from "node:timers/promises";
import { AIMessage } from "@langchain/core/messages";
import { END, type LangGraphRunnableConfig, MessagesValue, START, StateGraph, StateSchema } from "@langchain/langgraph";
import { z } from "zod";

const State = new StateSchema({
  messages: MessagesValue,
  delay: z.number().int().nonnegative().optional(),
  gate: z.string().optional(),
});

function delayOf(state: typeof State.State, config: LangGraphRunnableConfig): number {
  if (typeof state.delay === "number") return state.delay;
  const configured = Number(config.configurable?.delay ?? 0);
  return Number.isFinite(configured) && configured > 0 ? configured : 0;
}

/** Resolves once `file` exists: its directory is watched (inotify) before the first look, so no creation is missed. */
function gateOpened(file: string, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    let settled = false;
    const settle = (error?: unknown) => {
      if (settled) return;
      settled = true;
      watcher.close();
      signal?.removeEventListener("abort", onAbort);
      if (error === undefined) resolve();
      else reject(error);
    };
    const onAbort = () => settle(signal?.reason ?? new Error("aborted"));
    const watcher = watch(path.dirname(file), () => {
      if (existsSync(file)) settle();
    });
    signal?.addEventListener("abort", onAbort, { once: true });
    if (signal?.aborted) onAbort();
    else if (existsSync(file)) settle();
  });
}

export const graph = new StateGraph(State)
  .addNode("wait", async (state, config): Promise<Partial<typeof State.State>> => {
    if (state.gate) await gateOpened(state.gate, config.signal);
    const ms = delayOf(state, config);
    if (ms > 0) await wait(ms, undefined, { signal: config.signal });
    return { messages: [new AIMessage({ id: `ai-${state.messages.length}`, content: `waited ${ms}ms` })] };
  })
  .addEdge(START, "wait")
  .addEdge("wait", END)
  .compile();
graph.name = "delay";
