import { parentPort, workerData } from "node:worker_threads";
import { undiciSender, type SendOptions } from "./sender.js";
import type { SenderReply, SenderRequest } from "./threaded-sender.js";

/**
 * The webhook sender's thread: undici and its keep-alive sockets live here, on an event loop that
 * only sends, so a POST leaves at once however busy the server's loop is. The URL policy is
 * checked here too, in the socket's lookup (the thread resolves names itself).
 */
const port = parentPort;
if (!port) throw new Error("sender-worker.ts runs as a worker thread");
const sender = undiciSender(workerData as SendOptions);
const aborts = new Map<number, AbortController>();

port.on("message", (m: SenderRequest) => {
  if (m.type === "send") {
    const controller = new AbortController();
    aborts.set(m.id, controller);
    void sender.send(m.url, m.body, m.headers, controller.signal).then((result) => {
      aborts.delete(m.id);
      port.postMessage({ id: m.id, result } satisfies SenderReply);
    });
  } else if (m.type === "abort") {
    aborts.get(m.id)?.abort(new Error(m.reason));
  } else {
    void sender.close().finally(() => port.close());
  }
});
