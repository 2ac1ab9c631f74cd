/**
 * A TCP proxy on 127.0.0.1 for connection-loss tests: put it between a client and a server, then
 * `cut()` to reset every connection and refuse new ones (as a network blip or a node going away
 * does), `heal()` to let connections through again.
 *
 * Hand-written (node:net, ~60 lines): the npm proxies (node-tcp-proxy, tcp-proxy.js) forward but
 * cannot cut, and Toxiproxy needs a binary of its own.
 */
import net from "node:net";
import { once } from "node:events";

export interface TcpProxy {
  /** The port the proxy listens on (127.0.0.1). */
  port: number;
  /** Resets every open connection (RST) and resets each new one at once until `heal()`. */
  cut(): void;
  heal(): void;
  /** Connections accepted and forwarded so far (refused ones not counted). */
  readonly forwarded: number;
  close(): Promise<void>;
}

export async function startTcpProxy(target: { host?: string; port: number }): Promise<TcpProxy> {
  const host = target.host ?? "127.0.0.1";
  const open = new Set<net.Socket>();
  let cut = false;
  let forwarded = 0;
  const track = (socket: net.Socket) => {
    open.add(socket);
    socket.once("close", () => open.delete(socket));
    socket.on("error", () => undefined); // a reset is what this proxy is for
  };
  const server = net.createServer((client) => {
    track(client);
    if (cut) {
      client.resetAndDestroy();
      return;
    }
    forwarded++;
    const upstream = net.connect({ host, port: target.port });
    track(upstream);
    client.pipe(upstream);
    upstream.pipe(client);
    // Either side going away takes the other with it (a reset stays a reset).
    client.once("close", () => upstream.destroy());
    upstream.once("close", () => client.destroy());
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const port = (server.address() as net.AddressInfo).port;
  return {
    port,
    get forwarded() {
      return forwarded;
    },
    cut() {
      cut = true;
      for (const socket of [...open]) socket.resetAndDestroy();
    },
    heal() {
      cut = false;
    },
    async close() {
      for (const socket of [...open]) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
