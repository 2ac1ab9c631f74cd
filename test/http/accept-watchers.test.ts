import net from "node:net";
import t from "tap";
import { watchAccepts } from "../../src/http/accept-watchers.js";
import { ConfigError, loadConfig } from "../../src/config.js";
import { startTestServer } from "../support/server.js";

const CLIENTS = 24;

/** Blocks the event loop, as a turn full of token traffic does, so that connections pile up in the accept queue. */
function busyFor(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end);
}

/** A server counting the connections it accepts, listening on a free port. */
async function countingServer(): Promise<{ server: net.Server; port: number; accepted: () => number; sockets: net.Socket[] }> {
  let accepted = 0;
  const sockets: net.Socket[] = [];
  const server = net.createServer((socket) => {
    accepted++;
    sockets.push(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", 511, resolve));
  return { server, port: (server.address() as net.AddressInfo).port, accepted: () => accepted, sockets };
}

/**
 * Opens `n` connections, blocks the loop so that they pile up in the accept queue, then counts the connections
 * the server accepts between consecutive check phases (one turn of the event loop each): the most in one turn,
 * once all are in.
 */
async function burst(port: number, n: number, accepted: () => number): Promise<{ most: number; clients: net.Socket[] }> {
  const goal = accepted() + n;
  const clients = Array.from({ length: n }, () => net.connect(port, "127.0.0.1"));
  await Promise.all(clients.map((c) => new Promise((resolve) => c.once("connect", resolve))));
  busyFor(50);
  let most = 0;
  let before = accepted();
  while (accepted() < goal) {
    await new Promise((resolve) => setImmediate(resolve));
    most = Math.max(most, accepted() - before);
    before = accepted();
  }
  return { most, clients };
}

/** `CLIENTS` connections in a burst on a server with `perTurn` descriptors: the most accepted in one turn. */
async function mostAcceptedInOneTurn(perTurn: number): Promise<{ most: number; extra: number }> {
  const { server, port, accepted, sockets } = await countingServer();
  const watchers = watchAccepts(server, perTurn, (message) => t.fail(message));
  const extra = await watchers.ready;
  const { most, clients } = await burst(port, CLIENTS, accepted);
  for (const socket of [...clients, ...sockets]) socket.destroy();
  watchers.close();
  await new Promise((resolve) => server.close(resolve));
  return { most, extra };
}

t.test(
  "Node accepts one connection per turn of the event loop; the extra descriptors accept one each more",
  { skip: process.platform !== "linux" && "Linux only" },
  async (t) => {
    const alone = await mostAcceptedInOneTurn(1);
    t.equal(alone.extra, 0, "ACCEPTS_PER_TURN=1 adds no descriptor");
    t.equal(alone.most, 1, "the premise: one descriptor, one accepted connection per turn");

    const widened = await mostAcceptedInOneTurn(8);
    t.equal(widened.extra, 7, "seven more descriptors of the listening socket");
    t.ok(widened.most >= 2 && widened.most <= 8, `up to 8 connections accepted in one turn (got ${widened.most})`);
  },
);

t.test(
  "a server with extra descriptors serves on them, and none accepts once it is closed",
  { skip: process.platform !== "linux" && "Linux only" },
  async (t) => {
    const server = await startTestServer({ env: { ACCEPTS_PER_TURN: "8" } });
    t.equal(await server.server.acceptDescriptors, 7, "seven more descriptors, once the server has started");
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    t.match(metrics, /^agent_server_accepting_descriptors 8$/m, "/metrics counts the eight listening (fewer than the 16 that listen at rest)");
    const { port } = new URL(server.url);
    // Connections opened together land on whichever descriptor accepts them: every one is answered.
    const answers = await Promise.all(Array.from({ length: 16 }, () => fetch(`${server.url}/ok`, { headers: { connection: "close" } })));
    t.same(
      answers.map((a) => a.status),
      Array(16).fill(200),
    );
    await server.close();
    const refused = await new Promise<string>((resolve) => {
      const socket = net.connect(Number(port), "127.0.0.1");
      socket.once("connect", () => {
        socket.destroy();
        resolve("connected");
      });
      socket.once("error", (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
    });
    t.equal(refused, "ECONNREFUSED", "after close no descriptor of the socket is left listening");
  },
);

t.test("ACCEPTS_PER_TURN must be an integer from 1 to 256", async (t) => {
  for (const bad of ["0", "-1", "1.5", "257", "many"]) {
    t.throws(() => loadConfig({ ACCEPTS_PER_TURN: bad }), ConfigError, `ACCEPTS_PER_TURN=${bad}`);
  }
  t.equal(loadConfig({}).acceptsPerTurn, 256);
  t.equal(loadConfig({ ACCEPTS_PER_TURN: "1" }).acceptsPerTurn, 1);
});

t.test(
  "the descriptor helper never takes a connection: clients waiting while it hands the copies back are all the server's",
  { skip: process.platform !== "linux" && "Linux only" },
  async (t) => {
    const server = net.createServer((socket) => socket.end("served\n"));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", 511, resolve));
    const { port } = server.address() as net.AddressInfo;
    // Connections already waiting in the accept queue when the helper gets the socket, and the server's loop
    // blocked meanwhile: a helper that listened on it (its own loop free) would accept them and drop them at its exit.
    const clients = Array.from({ length: 20 }, () => net.connect(port, "127.0.0.1"));
    await Promise.all(clients.map((c) => new Promise((resolve) => c.once("connect", resolve))));
    const answers = clients.map(
      (c) =>
        new Promise<string>((resolve) => {
          let text = "";
          c.on("data", (chunk) => (text += String(chunk)));
          c.on("close", () => resolve(text.trim()));
          c.on("error", () => {});
        }),
    );
    let spawned!: () => void;
    const started = new Promise<void>((resolve) => (spawned = resolve));
    const watchers = watchAccepts(server, 8, (message) => t.fail(message), { startAfter: started });
    spawned();
    await new Promise<void>((resolve) => queueMicrotask(resolve)); // the helper is spawned and has the socket
    await new Promise<void>((resolve) => queueMicrotask(resolve));
    busyFor(1_500); // long enough for the helper to start and read its message
    t.equal(await watchers.ready, 7, "seven copies");
    // A client the helper took would never be answered: every one must be, by the server.
    const deadline = setTimeout(() => clients.forEach((c) => c.destroy()), 10_000);
    t.same(await Promise.all(answers), Array(20).fill("served"), "every waiting client was accepted by the server");
    clearTimeout(deadline);
    watchers.close();
    await new Promise((resolve) => server.close(resolve));
  },
);

/** Resolves with the first state `onChange` reports that `wanted` accepts. */
function stateWatch() {
  let waiter: { wanted: (s: State) => boolean; resolve: (s: State) => void } | undefined;
  const seen: State[] = [];
  return {
    seen,
    onChange(state: State) {
      seen.push(state);
      if (waiter?.wanted(state)) {
        waiter.resolve(state);
        waiter = undefined;
      }
    },
    until(wanted: (s: State) => boolean): Promise<State> {
      return new Promise((resolve) => (waiter = { wanted, resolve }));
    },
  };
}
type State = { listening: number; reserve: number };

t.test(
  "a few descriptors listen at rest; a turn that uses all of them brings in the reserve, which goes once the bursts stop",
  { skip: process.platform !== "linux" && "Linux only" },
  async (t) => {
    const { server, port, accepted, sockets } = await countingServer();
    const states = stateWatch();
    const watchers = watchAccepts(server, 48, (message) => t.fail(message), { resting: 4, quietMs: 300, onChange: states.onChange });
    t.equal(await watchers.ready, 47, "47 copies held");
    t.same(states.seen.at(-1), { listening: 4, reserve: 44 }, "4 descriptors listen at rest, 44 wait in reserve");

    const first = await burst(port, 40, accepted);
    t.same(states.seen.at(-1), { listening: 48, reserve: 0 }, "the burst brought in the whole reserve");
    t.ok(first.most > 4, `more than the 4 resting descriptors accepted in one turn once it did (most: ${first.most})`);

    // No turn uses the resting descriptors any more: after the quiet time only they listen, and a helper fetches the reserve again.
    t.same(await states.until((s) => s.listening === 4), { listening: 4, reserve: 0 }, "back to the resting descriptors");
    t.same(await states.until((s) => s.reserve === 44), { listening: 4, reserve: 44 }, "the reserve fetched again");

    // One connection at a time is not a burst.
    const single = net.connect(port, "127.0.0.1");
    await new Promise((resolve) => single.once("connect", resolve));
    while (accepted() < 41) await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setImmediate(resolve));
    t.equal(watchers.listening, 4, "a single connection leaves the reserve alone");

    const second = await burst(port, 40, accepted);
    t.equal(watchers.listening, 48, "the next burst brings the refetched reserve in");
    t.ok(second.most > 4, `more than 4 accepted in one turn again (most: ${second.most})`);

    for (const socket of [...first.clients, ...second.clients, single, ...sockets]) socket.destroy();
    watchers.close();
    t.equal(watchers.listening, 1, "closed: only the server's own descriptor is left");
    await new Promise((resolve) => server.close(resolve));
  },
);
