/**
 * A server process (the real `startServer`, as src/main.ts starts it) whose scheduler clock (cron
 * ticks, TTLs) runs FAST_CLOCK_SCALE times faster than the system's from FAST_CLOCK_ORIGIN (epoch
 * ms). Processes started with the same two values agree on the time, so a once-a-minute cron fires
 * every few seconds across a cluster of real processes (a fake clock cannot be shared between
 * processes). Leases, retries and the log's timestamps keep the system clock, as in production.
 */
import { loadConfig } from "../../src/config.js";
import { startServer } from "../../src/server.js";
import { systemClock, type Clock } from "../../src/context/clock.js";

const origin = Number(process.env.FAST_CLOCK_ORIGIN);
const scale = Number(process.env.FAST_CLOCK_SCALE);
if (!Number.isFinite(origin) || !(scale >= 1)) throw new Error("FAST_CLOCK_ORIGIN (epoch ms) and FAST_CLOCK_SCALE (>= 1) are required");

const clock: Clock = {
  now: () => origin + (Date.now() - origin) * scale,
  setTimer: (ms, fn) => systemClock.setTimer(ms / scale, fn),
};

const config = loadConfig();
const server = await startServer(config, { clock });
console.log(`agent-server listening on ${server.url} (store: ${server.storeKind}, fast clock ×${scale})`);
await server.ready;
console.log("agent-server ready: graphs loaded, run worker started");
process.on("SIGTERM", () => {
  void server.close().then(() => process.exit(0));
});
