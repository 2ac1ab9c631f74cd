import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import type { AttemptResult } from "./retry.js";
import type { SendOptions, WebhookSender } from "./sender.js";

/** Messages to the sender thread. */
export type SenderRequest =
  | { type: "send"; id: number; url: string; body: string; headers: Record<string, string> }
  | { type: "abort"; id: number; reason: string }
  | { type: "close" };

/** The worker's file: beside this module in the sources, under `webhooks/` beside the bundle's chunk. */
function workerFile(): URL {
  const candidates = ["./sender-worker.js", "./webhooks/sender-worker.js", "./sender-worker.ts"].map((p) => new URL(p, import.meta.url));
  const found = candidates.find((url) => existsSync(fileURLToPath(url)));
  if (!found) throw new Error(`the webhook sender thread's module is missing (looked for ${candidates.map((u) => fileURLToPath(u)).join(", ")})`);
  return found;
}

/**
 * Sends from a worker thread (see sender-worker.ts). Under load the server's event loop turns
 * every 15 to 30 ms, and undici waits a turn before it writes on a kept-alive socket; the sender's
 * own loop is idle, so the POST leaves when it is asked for. The thread starts with the first
 * webhook, and again after it dies (its deliveries in flight then fail, and are retried).
 * A custom resolver cannot cross threads: with one, use `undiciSender` in this thread.
 */
export function threadedSender(o: Omit<SendOptions, "resolver">): { send: WebhookSender; close(): Promise<void> } {
  let worker: Worker | undefined;
  let nextId = 0;
  const pending = new Map<number, (result: AttemptResult) => void>();

  const failAll = (why: string) => {
    for (const settle of pending.values()) settle({ error: why });
    pending.clear();
  };

  const start = (): Worker => {
    const file = workerFile();
    // From the sources (tests, `tsx`), the thread registers tsx itself: loader flags do not reach workers.
    const w = file.pathname.endsWith(".ts")
      ? new Worker(`import(${JSON.stringify(import.meta.resolve("tsx/esm/api"))}).then(({ register }) => { register(); return import(${JSON.stringify(file.href)}); })`, { eval: true, workerData: o })
      : new Worker(file, { workerData: o });
    w.unref(); // the server's stop closes it; it never holds a process open by itself
    w.on("message", (m: { id: number; result: AttemptResult }) => {
      const settle = pending.get(m.id);
      pending.delete(m.id);
      settle?.(m.result);
    });
    w.on("error", (error) => failAll(`webhook sender thread failed: ${error.message}`));
    w.on("exit", (code) => {
      if (worker === w) worker = undefined;
      failAll(`webhook sender thread exited (code ${code})`);
    });
    return w;
  };

  const send: WebhookSender = async (url, body, headers, signal) => {
    let w: Worker;
    try {
      w = worker ??= start();
    } catch (error) {
      return { error: `webhook sender thread: ${(error as Error).message}` };
    }
    const id = nextId++;
    return new Promise<AttemptResult>((resolve) => {
      const onAbort = () => w.postMessage({ type: "abort", id, reason: String((signal?.reason as Error | undefined)?.message ?? "aborted") } satisfies SenderRequest);
      pending.set(id, (result) => {
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
    const w = worker;
    worker = undefined;
    if (!w) return;
    const exited = new Promise<void>((resolve) => w.once("exit", () => resolve()));
    w.postMessage({ type: "close" } satisfies SenderRequest);
    await exited;
  };

  return { send, close };
}
