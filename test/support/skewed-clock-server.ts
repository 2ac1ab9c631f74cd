/**
 * A server process (the real `startServer`, as src/main.ts starts it) whose whole clock is CLOCK_OFFSET_MS
 * (signed ms) away from the system's: `Date.now()` and `new Date()` are shifted before anything is loaded,
 * so the log's timestamps, leases and deadlines all agree with one another inside the process, as on a
 * machine whose clock is set that far off. Two processes on one log then disagree on the time by exactly
 * the offset: what a test needs to see which process's clock a rule is measured on (an Idempotency-Key's
 * TTL, the abandonment of a claim) without waiting that long.
 */
const offset = Number(process.env.CLOCK_OFFSET_MS);
if (!Number.isFinite(offset)) throw new Error("CLOCK_OFFSET_MS (signed ms) is required");

const SystemDate = Date;
const now = () => SystemDate.now() + offset;
// `new Date()` and `Date.now()` shifted, `Date()` too; every other use (and instanceof Date) as usual.
globalThis.Date = new Proxy(SystemDate, {
  construct: (target, args: unknown[], newTarget: new (...a: unknown[]) => object) => Reflect.construct(target, args.length === 0 ? [now()] : args, newTarget),
  apply: () => new SystemDate(now()).toString(),
  get: (target, property) => (property === "now" ? now : (Reflect.get(target, property, target) as unknown)),
});

const { loadConfig } = await import("../../src/config.js");
const { startServer } = await import("../../src/server.js");
const server = await startServer(loadConfig());
console.log(`agent-server listening on ${server.url} (store: ${server.storeKind}, clock ${offset >= 0 ? "+" : ""}${offset} ms)`);
await server.ready;
console.log("agent-server ready: graphs loaded, run worker started");
process.on("SIGTERM", () => {
  void server.close().then(() => process.exit(0));
});
