/**
 * The parts of a running process, each registered with its closer as it is built, closed in the
 * reverse order. A closer that fails is reported and the others still run, so one stuck part does
 * not leave the store open. (AsyncDisposableStack is not in Node 20, and its npm polyfill throws one
 * combined error at the end instead of reporting each failure by name.)
 */
export class ResourceStack {
  private readonly closers: { name: string; close: () => unknown }[] = [];
  private closing: Promise<void> | undefined;

  constructor(
    private readonly onCloseError: (name: string, error: unknown) => void,
    /** Told when a closer is still running after `slowMs` (a shutdown that hangs names its part). */
    private readonly onSlowClose: (name: string, ms: number) => void = () => {},
    private readonly slowMs = 5_000,
  ) {}

  /** Whether close() was called: a part still being built in the background should not start. */
  get isClosing(): boolean {
    return this.closing !== undefined;
  }

  /** Registers `resource` with its closer; returns it, so that it reads as part of its construction. */
  use<T>(name: string, resource: T, close: (resource: T) => unknown): T {
    this.defer(name, () => close(resource));
    return resource;
  }

  /** Registers a closer (e.g. one that undoes a side effect). */
  defer(name: string, close: () => unknown): void {
    if (this.closing) throw new Error(`cannot register ${name}: already closing`);
    this.closers.push({ name, close });
  }

  /** Runs every closer, the last registered first; resolves once all ran (once, however often called). */
  close(): Promise<void> {
    this.closing ??= (async () => {
      for (const { name, close } of this.closers.reverse()) {
        const started = Date.now();
        const slow = setInterval(() => this.onSlowClose(name, Date.now() - started), this.slowMs);
        slow.unref();
        try {
          await close();
        } catch (error) {
          this.onCloseError(name, error);
        } finally {
          clearInterval(slow);
        }
      }
    })();
    return this.closing;
  }
}
