import t from "tap";
import { loadConfig, ConfigError } from "../src/config.js";
import { spawnServer } from "./support/process.js";
import { TEST_GRAPHS } from "./support/server.js";

/** HEAP_GROWING_PERCENT bounds how far V8 lets the heap grow past what is live (main.ts applies it). */

t.test("parsed with a default of 50; 0 leaves V8's own factor; out of range is refused by name", async (t) => {
  t.equal(loadConfig({}).heapGrowingPercent, 50);
  t.equal(loadConfig({ HEAP_GROWING_PERCENT: "0" }).heapGrowingPercent, 0);
  t.equal(loadConfig({ HEAP_GROWING_PERCENT: "25" }).heapGrowingPercent, 25);
  for (const bad of ["-1", "401", "1.5", "lots"]) {
    t.throws(() => loadConfig({ HEAP_GROWING_PERCENT: bad }), ConfigError, `"${bad}" refused`);
    t.match(
      String(
        (() => {
          try {
            loadConfig({ HEAP_GROWING_PERCENT: bad });
          } catch (e) {
            return (e as Error).message;
          }
        })(),
      ),
      /HEAP_GROWING_PERCENT/,
      `"${bad}": the message names the variable`,
    );
  }
});

t.test("the server process starts with it set, and stops at once with one clear line when it is bad", async (t) => {
  const dir = t.testdir();
  const good = await spawnServer({ LANGGRAPH_JSON: TEST_GRAPHS, DATA_DIR: dir, HEAP_GROWING_PERCENT: "30" });
  t.teardown(async () => {
    if (good.child.exitCode === null && good.child.signalCode === null) good.child.kill("SIGTERM");
    await good.exited;
  });
  t.ok(good.url, `started: ${good.stderr}`);
  t.equal((await fetch(`${good.url}/ok`)).status, 200);

  const bad = await spawnServer({ LANGGRAPH_JSON: TEST_GRAPHS, DATA_DIR: dir, HEAP_GROWING_PERCENT: "lots" });
  const { code } = await bad.exited;
  t.equal(bad.url, undefined, "never listened");
  t.not(code, 0, "exited non-zero");
  t.match(bad.stderr, /HEAP_GROWING_PERCENT/, "stderr names the variable");
});
