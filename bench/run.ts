/**
 * `npm run bench`: runs every benchmark in turn and prints one JSON object with their numbers.
 * Pick some with arguments: `npm run bench -- eventstore runs`. Flags: `--tiny` (a few seconds each,
 * what `npm test` runs), `--big` (largest sizes), `--list` (print the benchmark names, one a line).
 */
import type { BenchOptions } from "./support/options.js";
import { parseBenchOptions } from "./support/options.js";

const benches: Record<string, (options: BenchOptions) => Promise<Record<string, unknown>>> = {
  eventstore: async (o) => (await import("./eventstore.js")).benchEventStore(o),
  runs: async (o) => (await import("./runs.js")).benchRuns(o),
  scale: async (o) => (await import("./scale.js")).benchScale(o),
  a2a: async (o) => (await import("./a2a.js")).benchA2A(o),
  protocol: async (o) => (await import("./protocol.js")).benchProtocol(o),
  webhooks: async (o) => (await import("./webhooks.js")).benchWebhooks(o),
  // The server's run rate beside the graph invoked in-process, RSS after load and idle, CPU per run by phase.
  engine: async (o) => (await import("./engine.js")).benchEngine(o),
  // Encryption at rest: a server with LANGGRAPH_AES_KEY beside one without, loaded at the same time (also in engine).
  encryption: async (o) => (await import("./encryption.js")).benchEncryption(o),
  // Promises, heap bytes and GCs per job (server) and per invoke (engine): counts that do not drift with the machine's speed.
  cost: async (o) => (await import("./cost.js")).benchCost(o),
  // Where one sequential runs/wait's time goes, point by point (the server's trace points), beside the graph invoked in-process.
  "critical-path": async (o) => (await import("./critical-path.js")).benchCriticalPath(o),
  // Spawn to /ok of `node dist/main.js`, empty data dir and restart, and the server's start-up phases.
  start: async (o) => (await import("./start.js")).benchStart(o),
  // Runs (after warm-up runs) of the built server; the tiny size only proves the benchmark still works.
  "cpu-per-run": async (o) => (await import("./cpu-per-run.js")).benchCpuPerRun(o.tiny ? 40 : o.big ? 10_000 : 2_000, o.tiny ? 20 : 500),
  // Two builds (AB_A, AB_B; default this dist/ twice) in alternating rounds: paired ratios of rate, CPU, RSS, latency.
  // Sequential runs on a thread holding a long conversation, beside the graph invoked in-process on the same state.
  "large-state": async (o) => (await import("./large-state.js")).benchLargeState(o),
  ab: async (o) => (await import("./ab.js")).benchAB(o),
  // The same build on the graph in a user's project folder (its own LangGraph copies) and on this repository's, in alternating rounds.
  "project-vs-repo": async (o) => (await import("./project-vs-repo.js")).benchProjectVsRepo(o),
  // Runs' worth of events in the log read back by a filtered subscription.
  "filtered-catchup": async (o) => (await import("./filtered-catchup.js")).benchFilteredCatchUp(o.tiny ? 500 : o.big ? 50_000 : 10_000),
  // Waves of 20, 200 and 500 concurrent token streams (thread + runs/stream each): latencies, CPU per token and per run, peak RSS; `--anchor` adds the official JS dev server.
  streams: async (o) => (await import("./streams.js")).benchStreams(o),
};

const args = process.argv.slice(2).filter((a) => a !== "--");
if (args.includes("--list")) {
  console.log(Object.keys(benches).join("\n"));
  process.exit(0);
}
const options = parseBenchOptions(args);
const wanted = args.filter((a) => !a.startsWith("--"));
const selected = wanted.length ? wanted : Object.keys(benches);
const unknown = selected.filter((name) => !benches[name]);
if (unknown.length) {
  console.error(`unknown benchmark "${unknown.join('", "')}"; known: ${Object.keys(benches).join(", ")}`);
  process.exit(2);
}
const results: Record<string, unknown> = { node: process.version, platform: `${process.platform}-${process.arch}`, ...options };
for (const name of selected) results[name] = await benches[name](options);
console.log(JSON.stringify(results, null, 2));
