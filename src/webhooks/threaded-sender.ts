import type { Worker } from "node:worker_threads";
import { moduleWorker } from "../util/module-worker.js";
import type { AttemptResult } from "./retry.js";
import type { SendOptions, WebhookSender } from "./sender.js";

/** Messages to the sender thread. */
export type SenderRequest =
  { type: "send"; id: number; url: string; body: string; headers: Record<string, string> } | { type: "abort"; id: number; reason: string } | { type: "close" };

/** The thread's answer to one send. */
export interface SenderReply {
  id: number;
  result: AttemptResult;
}

/** A running sender thread and the sends it owes an answer. */
interface SenderThread {
  worker: Worker;
  pending: Map<number, (result: AttemptResult) => void>;
}

/**
 * Sends from a worker thread (see sender-worker.ts). Under load the server's event loop turns
 * slowly, and undici waits a turn before it writes on a kept-alive socket; the sender's
 * own loop is idle, so the POST leaves when it is asked for. The thread starts with the first
 * webhook, and again after it dies (its deliveries in flight then fail, and are retried).
 * A custom resolver cannot cross threads: with one, use `undiciSender` in this thread.
 */
export function threadedSender(o: Omit<SendOptions, "resolver">): { send: WebhookSender; close(): Promise<void> } {
  let current: SenderThread | undefined;
  let nextId = 0;

  const start = (): SenderThread => {
    // Beside this module in the sources, under `webhooks/` beside the bundle's chunk.
    const w = moduleWorker(import.meta.url, ["./sender-worker.js", "./webhooks/sender-worker.js", "./sender-worker.ts"], { workerData: o });
    w.unref(); // the server's stop closes it; it never holds a process open by itself
    // Each thread answers for its own sends: one that exits fails only those, not a successor's.
    const thread: SenderThread = { worker: w, pending: new Map() };
    const failAll = (why: string) => {
      for (const settle of thread.pending.values()) settle({ error: why });
      thread.pending.clear();
    };
    w.on("message", (m: SenderReply) => {
      const settle = thread.pending.get(m.id);
      thread.pending.delete(m.id);
      settle?.(m.result);
    });
    w.on("error", (error) => failAll(`webhook sender thread failed: ${error.message}`));
    w.on("exit", (code) => {
      if (current === thread) current = undefined;
      failAll(`webhook sender thread exited (code ${code})`);
    });
    return thread;
  };

  const send: WebhookSender = async (url, body, headers, signal) => {
    let thread: SenderThread;
    try {
      thread = current ??= start();
    } catch (error) {
      return { error: `webhook sender thread: ${(error as Error).message}` };
    }
    const w = thread.worker;
    const id = nextId++;
    return new Promise<AttemptResult>((resolve) => {
      const onAbort = () =>
        w.postMessage({ type: "abort", id, reason: String((signal?.reason as Error | undefined)?.message ?? "aborted") } satisfies SenderRequest);
      thread.pending.set(id, (result) => {
        signal?.removeEventListener("abort", onAbort);
        resolve(result);
      });
      // Messages arrive in order: an abort always finds its send in the thread.
      w.postMessage({ type: "send", id, url, body, headers } satisfies SenderRequest);
      if (signal?.aborted) onAbort();
      else signal?.addEventListener("abort", onAbort, { once: true });
    });
  };

  const close = async (): Promise<void> => {
    const w = current?.worker;
    current = undefined;
    if (!w) return;
    const exited = new Promise<void>((resolve) => w.once("exit", () => resolve()));
    w.postMessage({ type: "close" } satisfies SenderRequest);
    await exited;
  };

  return { send, close };
}
