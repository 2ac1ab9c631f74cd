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

/**
 * Opens `CLIENTS` connections while the loop is blocked, then counts the connections the server accepts
 * between consecutive check phases (one turn of the event loop each): the most in one turn.
 */
async function mostAcceptedInOneTurn(perTurn: number): Promise<{ most: number; extra: number }> {
  let accepted = 0;
  const sockets: net.Socket[] = [];
  const server = net.createServer((socket) => {
    accepted++;
    sockets.push(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", 511, resolve));
  const watchers = watchAccepts(server, perTurn, (message) => t.fail(message));
  const extra = await watchers.ready;
  const { port } = server.address() as net.AddressInfo;
  const clients = Array.from({ length: CLIENTS }, () => net.connect(port, "127.0.0.1"));
  await Promise.all(clients.map((c) => new Promise((resolve) => c.once("connect", resolve))));
  busyFor(50);
  let most = 0;
  let before = accepted;
  while (accepted < CLIENTS) {
    await new Promise((resolve) => setImmediate(resolve));
    most = Math.max(most, accepted - before);
    before = accepted;
  }
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
  t.equal(loadConfig({}).acceptsPerTurn, 32);
  t.equal(loadConfig({ ACCEPTS_PER_TURN: "1" }).acceptsPerTurn, 1);
});
