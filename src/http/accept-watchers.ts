import { spawn, type ChildProcess } from "node:child_process";
import net from "node:net";

/**
 * Node (libuv ≥ 1.45 on Linux) accepts one connection per listening descriptor per turn of the event loop.
 * Under load a turn lasts hundreds of milliseconds, so a wave of new clients waits seconds in the kernel's
 * accept queue before the server reads a byte of theirs, whatever their requests cost. Each extra descriptor
 * of the same listening socket is one more accept per turn. Node has no `dup`, so a helper process receives
 * the socket once over IPC and sends it back: each copy arrives as a new descriptor (as cluster workers get
 * theirs). The helper never listens on it, so it never takes a connection, and it exits when done.
 */
// `on`, not `once`: while a 'message' listener is attached, the IPC channel keeps the helper alive to await the
// acknowledgement of each copy (Node sends one descriptor at a time).
const HELPER = `process.on("message", (count, handle) => {
  let left = count;
  const next = () => (left-- > 0 ? process.send("copy", handle, next) : (handle.close(), process.disconnect()));
  next();
});`;

/** How long the helper may take to send its copies before the server goes on with the one descriptor. */
const HELPER_TIMEOUT_MS = 10_000;

export interface AcceptWatchers {
  /** Settles once the copies are listening (or the helper failed: `warn` was told why); the count of extra descriptors. */
  readonly ready: Promise<number>;
  /** Stops every extra descriptor from accepting (the server's own is closed by its own close). */
  close(): void;
}

/**
 * Makes `server` accept up to `perTurn` connections per turn of the event loop: `perTurn − 1` more
 * descriptors of its listening socket, each handing what it accepts to the server as its own connections.
 * The helper starts once `startAfter` settles (spawning it blocks the loop for milliseconds, and its exchange
 * takes turns: not while the server starts). `perTurn` 1, a platform other than Linux, or a server without a
 * TCP handle: nothing is added.
 */
export function watchAccepts(
  server: net.Server,
  perTurn: number,
  warn: (message: string) => void,
  startAfter: Promise<unknown> = Promise.resolve(),
): AcceptWatchers {
  const handle = (server as unknown as { _handle?: unknown })._handle;
  if (perTurn <= 1 || process.platform !== "linux" || !handle) return { ready: Promise.resolve(0), close() {} };
  const copies: net.Server[] = [];
  let closed = false;
  let helper: ChildProcess | undefined;
  const copiesFromHelper = () =>
    new Promise<number>((resolve) => {
      let settled = false;
      const settle = (problem?: string) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        // A server closed while the copies came stops the helper itself: nothing to warn about.
        if (problem && !closed) {
          warn(`accepting one connection per event-loop turn: ${problem}`);
          helper?.kill();
        }
        resolve(copies.length);
      };
      const timer = setTimeout(
        () => settle(`the descriptor helper sent ${copies.length} of ${perTurn - 1} copies in ${HELPER_TIMEOUT_MS} ms`),
        HELPER_TIMEOUT_MS,
      );
      timer.unref();
      // An empty environment: the helper needs none, and NODE_OPTIONS (a loader, say) would only slow its start.
      helper = spawn(process.execPath, ["-e", HELPER], { stdio: ["ignore", "ignore", "inherit", "ipc"], env: {} });
      helper.on("error", (error) => settle(`the descriptor helper could not start (${error.message})`));
      // 'close', not 'exit': the copies still in the IPC channel are read before it.
      helper.on("close", () => settle(copies.length < perTurn - 1 ? `the descriptor helper exited after ${copies.length} copies` : undefined));
      helper.on("message", (_message, copy) => {
        if (!copy) return;
        if (closed) return void (copy as { close?: () => void }).close?.();
        copies.push(listenOn(copy, server, warn));
        if (copies.length === perTurn - 1) settle();
      });
      helper.send(perTurn - 1, handle as net.Server);
    });
  // A start that failed stops the server: no helper for it.
  const ready = startAfter.then(
    () => (closed ? 0 : copiesFromHelper()),
    () => 0,
  );
  return {
    ready,
    close() {
      closed = true;
      helper?.kill();
      for (const copy of copies) copy.close();
    },
  };
}

/** A server on one copy of the descriptor, with the options of the one it feeds, so its sockets are alike. */
function listenOn(copy: unknown, server: net.Server, warn: (message: string) => void): net.Server {
  const own = server as net.Server & {
    allowHalfOpen: boolean;
    pauseOnConnect: boolean;
    noDelay: boolean;
    keepAlive: boolean;
    keepAliveInitialDelay: number;
    highWaterMark?: number;
  };
  const watcher = net.createServer(
    {
      allowHalfOpen: own.allowHalfOpen,
      pauseOnConnect: own.pauseOnConnect,
      noDelay: own.noDelay,
      keepAlive: own.keepAlive,
      // net.Server keeps it in seconds; its constructor takes milliseconds.
      keepAliveInitialDelay: own.keepAliveInitialDelay * 1000,
      ...(own.highWaterMark ? { highWaterMark: own.highWaterMark } : {}),
    },
    (socket) => server.emit("connection", socket),
  );
  watcher.on("error", (error) => {
    warn(`an extra accepting descriptor failed and was closed: ${error.message}`);
    watcher.close();
  });
  watcher.listen(copy);
  return watcher;
}
