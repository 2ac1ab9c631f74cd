import { spawn, type ChildProcess } from "node:child_process";
import net from "node:net";

/**
 * Node (libuv ≥ 1.45 on Linux) accepts one connection per listening descriptor per turn of the event loop.
 * Under load a turn lasts hundreds of milliseconds, so a wave of new clients waits seconds in the kernel's
 * accept queue before the server reads a byte of theirs, whatever their requests cost. Each extra descriptor
 * of the same listening socket is one more accept per turn. Node has no `dup`, so a helper process receives
 * the socket's bare handle over IPC and sends it back: each copy arrives as a new descriptor, not listening.
 * The helper never listens on it, so it never takes a connection, and it exits when done.
 *
 * Every listening copy wakes for every new connection, and all but one of them try an accept in vain (a few
 * microseconds each): many copies would tax each new connection of a quiet server. So only a few listen at
 * rest; the rest are held in reserve and listen from the first turn that used every listening descriptor (a
 * burst: more may be waiting), until no turn has needed more than the resting ones for a while. Those are
 * then closed and a helper fetches the reserve again.
 */
// `on`, not `once`: while a 'message' listener is attached, the IPC channel keeps the helper alive to await the
// acknowledgement of each copy (Node sends one descriptor at a time).
const HELPER = `process.on("message", (count, handle) => {
  let left = count;
  const next = () => (left-- > 0 ? process.send("copy", handle, next) : (handle.close(), process.disconnect()));
  next();
});`;

/** How long the helper may take to send its copies before the server goes on without the rest. */
const HELPER_TIMEOUT_MS = 10_000;
/** Descriptors listening at rest, the server's own included. */
const RESTING_DESCRIPTORS = 16;
/** How long no turn may use every resting descriptor before the reserve stops listening. */
const QUIET_MS = 10_000;

export interface AcceptWatchersOptions {
  /** The helper starts once this settles (spawning blocks the loop for milliseconds: not while the server starts). */
  startAfter?: Promise<unknown>;
  /** Descriptors listening at rest, the server's own included (default RESTING_DESCRIPTORS). */
  resting?: number;
  /** See QUIET_MS. */
  quietMs?: number;
  /** Told each time the descriptors listening or held in reserve change (tests, metrics). */
  onChange?: (state: { listening: number; reserve: number }) => void;
}

export interface AcceptWatchers {
  /** Settles once the copies are held (or the helper failed: `warn` was told why); the count of extra descriptors. */
  readonly ready: Promise<number>;
  /** Descriptors listening now, the server's own included. */
  readonly listening: number;
  /** Stops every extra descriptor from accepting (the server's own is closed by its own close). */
  close(): void;
}

/** A copy of the listening socket as the helper hands it back: a bare handle, not listening. */
type Copy = { close(): void };

/**
 * Makes `server` accept up to `perTurn` connections per turn of the event loop: `perTurn − 1` more
 * descriptors of its listening socket, each handing what it accepts to the server as its own connections
 * (`options.resting` of them listening at rest, all under bursts of new connections). `perTurn` 1, a
 * platform other than Linux, or a server without a TCP handle: nothing is added.
 */
export function watchAccepts(server: net.Server, perTurn: number, warn: (message: string) => void, options: AcceptWatchersOptions = {}): AcceptWatchers {
  const handle = (server as unknown as { _handle?: unknown })._handle;
  if (perTurn <= 1 || process.platform !== "linux" || !handle) return { ready: Promise.resolve(0), listening: 1, close() {} };
  const restingCopies = Math.min(perTurn, options.resting ?? RESTING_DESCRIPTORS) - 1;
  const quietMs = options.quietMs ?? QUIET_MS;
  const atRest: net.Server[] = [];
  const inBurst: net.Server[] = [];
  const reserve: Copy[] = [];
  let closed = false;
  let helper: ChildProcess | undefined;
  let quietCheck: NodeJS.Timeout | undefined;
  let acceptedThisTurn = 0;
  let lastBusyTurn = 0;
  const listening = () => 1 + atRest.length + inBurst.length;
  const changed = () => options.onChange?.({ listening: listening(), reserve: reserve.length });

  /** `count` copies from a helper, each handed to `place` as it arrives; settles with how many came (within `timeoutMs`). */
  const copiesFromHelper = (count: number, place: (copy: Copy) => void, timeoutMs: number) =>
    new Promise<number>((resolve) => {
      let received = 0;
      let settled = false;
      const settle = (problem?: string) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        helper = undefined;
        // A server closed while the copies came stops the helper itself: nothing to warn about.
        if (problem && !closed) {
          warn(`accepting fewer connections per event-loop turn: ${problem}`);
          child.kill();
        }
        resolve(received);
      };
      const timer = Number.isFinite(timeoutMs)
        ? setTimeout(() => settle(`the descriptor helper sent ${received} of ${count} copies in ${timeoutMs} ms`), timeoutMs).unref()
        : undefined;
      // An empty environment: the helper needs none, and NODE_OPTIONS (a loader, say) would only slow its start.
      const child = spawn(process.execPath, ["-e", HELPER], { stdio: ["ignore", "ignore", "inherit", "ipc"], env: {} });
      helper = child;
      child.on("error", (error) => settle(`the descriptor helper could not start (${error.message})`));
      // 'close', not 'exit': the copies still in the IPC channel are read before it.
      child.on("close", () => settle(received < count ? `the descriptor helper exited after ${received} copies` : undefined));
      child.on("message", (_message, copy) => {
        if (!copy) return;
        if (closed || settled) return void (copy as Copy).close();
        received++;
        place(copy as Copy);
        if (received === count) settle();
      });
      // The bare handle, not the server: a server would be listening in the helper, which would accept connections and drop them.
      child.send(count, handle as net.Server);
    });

  /** A burst: every descriptor accepted this turn, more may wait. The reserve listens until the bursts stop. */
  const widen = () => {
    for (const copy of reserve.splice(0)) inBurst.push(listenOn(copy, server, warn));
    changed();
    quietCheck ??= setInterval(
      () => {
        // Not while a helper still brings copies: one at a time.
        if (!helper && performance.now() - lastBusyTurn >= quietMs) narrow();
      },
      Math.max(1, quietMs / 2),
    ).unref();
  };

  /** Bursts have stopped: the reserve's descriptors are closed (a listening one cannot stop) and fetched again. */
  const narrow = () => {
    clearInterval(quietCheck);
    quietCheck = undefined;
    const count = inBurst.length;
    for (const watcher of inBurst.splice(0)) watcher.close();
    changed();
    // Each copy waits for a turn of this loop, and it may still be busy: the refill takes the time it needs.
    if (!closed && count > 0)
      void copiesFromHelper(
        count,
        (copy) => {
          reserve.push(copy);
          changed();
        },
        Infinity,
      );
  };

  const endOfTurn = () => {
    const accepted = acceptedThisTurn;
    acceptedThisTurn = 0;
    if (closed) return;
    if (accepted >= 1 + atRest.length) lastBusyTurn = performance.now();
    if (accepted >= listening() && reserve.length > 0) widen();
  };
  // Every descriptor's connections reach the server's 'connection' event; a turn's accepts all come before its check phase.
  const countAccept = () => {
    if (acceptedThisTurn++ === 0) setImmediate(endOfTurn);
  };

  const startAfter = options.startAfter ?? Promise.resolve();
  // A start that failed stops the server: no helper for it.
  const ready = startAfter.then(
    () =>
      closed
        ? 0
        : copiesFromHelper(
            perTurn - 1,
            (copy) => {
              if (atRest.length < restingCopies) atRest.push(listenOn(copy, server, warn));
              else reserve.push(copy);
            },
            HELPER_TIMEOUT_MS,
          ).then((count) => {
            if (count > restingCopies && !closed) server.on("connection", countAccept);
            changed();
            return count;
          }),
    () => 0,
  );
  return {
    ready,
    get listening() {
      return listening();
    },
    close() {
      closed = true;
      helper?.kill();
      clearInterval(quietCheck);
      server.off("connection", countAccept);
      for (const watcher of [...atRest, ...inBurst]) watcher.close();
      for (const copy of reserve) copy.close();
      atRest.length = inBurst.length = reserve.length = 0;
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
