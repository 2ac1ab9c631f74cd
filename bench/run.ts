/**
 * `npm run bench`: runs every benchmark in turn and prints one JSON object with their numbers.
 * Pick some with arguments: `npm run bench -- eventstore runs`.
 */
const benches: Record<string, () => Promise<Record<string, unknown>>> = {
  eventstore: async () => (await import("./eventstore.js")).benchEventStore(),
  runs: async () => (await import("./runs.js")).benchRuns(),
};

const wanted = process.argv.slice(2).filter((a) => a !== "--");
const selected = wanted.length ? wanted : Object.keys(benches);
const results: Record<string, unknown> = { node: process.version, platform: `${process.platform}-${process.arch}` };
for (const name of selected) {
  const bench = benches[name];
  if (!bench) throw new Error(`unknown benchmark "${name}"; known: ${Object.keys(benches).join(", ")}`);
  results[name] = await bench();
}
console.log(JSON.stringify(results, null, 2));
