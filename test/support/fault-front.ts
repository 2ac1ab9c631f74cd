import net from "node:net";

/**
 * The TCP front door of a test server: listens on a public port and pipes every connection to the
 * real server behind it, so that a test can cut the connections (what a network blip or a leader
 * election does to a client) or refuse new ones (a server that is down) and then let them in again,
 * on the same port. It works below TLS and HTTP/2: clients see exactly what a dropped TCP
 * connection looks like.
 */
export class FaultFront {
  private listener: net.Server | undefined;
  private readonly pairs = new Set<{ client: net.Socket; backend: net.Socket }>();
  /** Connections accepted so far, and how many were cut. */
  accepted = 0;
  cut = 0;

  private constructor(
    private readonly backendPort: number,
    readonly port: number,
  ) {}

  /** Opens the front on `port` (0: a free one) for a server on `backendPort`. */
  static async open(backendPort: number, port = 0): Promise<FaultFront> {
    const listener = FaultFront.createListener();
    const bound = await FaultFront.listen(listener, port);
    const front = new FaultFront(backendPort, bound);
    front.attach(listener);
    return front;
  }

  private static createListener(): net.Server {
    return net.createServer({ noDelay: true });
  }

  private static listen(listener: net.Server, port: number): Promise<number> {
    return new Promise<number>((resolve, reject) => {
      listener.once("error", reject);
      listener.listen({ host: "127.0.0.1", port, exclusive: true }, () => {
        listener.off("error", reject);
        resolve((listener.address() as net.AddressInfo).port);
      });
    });
  }

  private attach(listener: net.Server): void {
    this.listener = listener;
    listener.on("connection", (client) => {
      this.accepted++;
      const backend = net.connect({ host: "127.0.0.1", port: this.backendPort, noDelay: true });
      const pair = { client, backend };
      this.pairs.add(pair);
      const drop = () => {
        this.pairs.delete(pair);
        client.destroy();
        backend.destroy();
      };
      client.on("error", drop).on("close", drop);
      backend.on("error", drop).on("close", drop);
      client.pipe(backend);
      backend.pipe(client);
    });
  }

  /** Whether new connections are accepted now. */
  get listening(): boolean {
    return this.listener !== undefined;
  }

  /** Drops every open connection now (both sides see a reset); new connections are still accepted. */
  cutAll(): number {
    const open = [...this.pairs];
    for (const pair of open) {
      this.pairs.delete(pair);
      pair.client.resetAndDestroy();
      pair.backend.destroy();
    }
    this.cut += open.length;
    return open.length;
  }

  /** Stops listening (connection attempts are refused) and drops every open connection. */
  async refuse(): Promise<void> {
    const listener = this.listener;
    this.listener = undefined;
    this.cutAll();
    if (listener) await new Promise<void>((resolve) => listener.close(() => resolve()));
  }

  /** Listens again on the same port. */
  async accept(): Promise<void> {
    if (this.listener) return;
    const listener = FaultFront.createListener();
    await FaultFront.listen(listener, this.port);
    this.attach(listener);
  }

  async close(): Promise<void> {
    await this.refuse();
  }
}
