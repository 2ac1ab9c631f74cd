import t from "tap";
import { IdleMemory, fullGc } from "../../src/util/idle-memory.js";

/** The sampler that returns memory once the process went idle after a burst (src/util/idle-memory.ts). */

const MiB = 1024 * 1024;

/** `young`: what the young generation holds after each collection (default: shrunk, 1 MiB). */
function scripted(utilizations: number[], rssValues: number[], young: number[] = []) {
  const calls = { gc: 0, released: 0, returned: [] as Array<[number, number]> };
  let rss = rssValues[0]!;
  const memory = new IdleMemory({
    idleSamples: 2,
    idleBelow: 0.05,
    minGrowthBytes: 32 * MiB,
    utilization: () => utilizations.shift() ?? 0,
    rss: () => rss,
    gc: () => {
      calls.gc++;
      rss = rssValues[1]!;
    },
    release: [() => void calls.released++],
    onReturn: (before, after) => calls.returned.push([before, after]),
    youngBytes: () => young[Math.max(0, calls.gc / 2 - 1)] ?? 1 * MiB,
  });
  return { memory, calls, setRss: (bytes: number) => void (rss = bytes) };
}

t.test("returns memory after two idle samples in a row that follow growth, and only then", async (t) => {
  // constructor reads rss (100 MiB baseline); the sampler's first utilization read is the window start.
  const { memory, calls, setRss } = scripted([0.9, 0.01, 0.6, 0.01, 0.01], [100 * MiB, 120 * MiB]);
  setRss(300 * MiB); // a burst grew the heap
  memory.sample(); // busy
  memory.sample(); // idle 1
  memory.sample(); // busy again: the run of idle samples starts over
  memory.sample(); // idle 1
  t.equal(calls.gc, 0, "not before two idle samples in a row");
  memory.sample(); // idle 2
  t.equal(calls.gc, 2, "two full collections");
  t.equal(calls.released, 1, "then the release hooks");
  t.same(calls.returned, [[300 * MiB, 120 * MiB]]);
  t.equal(memory.returns, 1);
});

t.test("an idle process whose RSS did not grow is left alone", async (t) => {
  const { memory, calls, setRss } = scripted([0.01, 0.01, 0.01, 0.01], [100 * MiB, 90 * MiB]);
  setRss(120 * MiB); // 20 MiB of growth: under the 32 MiB threshold
  for (let i = 0; i < 4; i++) memory.sample();
  t.equal(calls.gc, 0);
});

t.test("after a return the new RSS is the baseline: staying idle does not collect again", async (t) => {
  const { memory, calls, setRss } = scripted([0.01, 0.01, 0.01, 0.01, 0.01, 0.01], [100 * MiB, 110 * MiB]);
  setRss(400 * MiB);
  memory.sample();
  memory.sample();
  t.equal(calls.gc, 2);
  for (let i = 0; i < 4; i++) memory.sample();
  t.equal(calls.gc, 2, "no further collection while nothing grew");
});

t.test("a return that left the young generation large is tried again at the next idle samples, up to five times", async (t) => {
  // V8 shrinks the young generation only when it sees a low allocation rate; the end of a load may still look busy.
  let { memory, calls, setRss } = scripted(Array(8).fill(0.01), [100 * MiB, 150 * MiB], [32 * MiB, 32 * MiB, 2 * MiB]);
  setRss(400 * MiB);
  memory.sample();
  memory.sample();
  t.equal(calls.gc, 2, "the return: young generation still 32 MiB");
  memory.sample();
  t.equal(calls.gc, 4, "tried again at the next idle sample, without new growth (still 32 MiB)");
  memory.sample();
  t.equal(calls.gc, 6, "and again: now shrunk");
  for (let i = 0; i < 4; i++) memory.sample();
  t.equal(calls.gc, 6, "nothing more once it shrank");

  ({ memory, calls, setRss } = scripted(Array(14).fill(0.01), [100 * MiB, 150 * MiB], Array(14).fill(32 * MiB)));
  setRss(400 * MiB);
  for (let i = 0; i < 14; i++) memory.sample();
  t.equal(calls.gc, 2 + 5 * 2, "never shrinking: five retries, then it waits for growth again");

  // A collection starts the next utilization window (it reads one value itself): idle, idle, (window), busy, idle, idle.
  ({ memory, calls, setRss } = scripted([0.01, 0.01, 0.01, 0.9, 0.01, 0.01], [100 * MiB, 150 * MiB], Array(10).fill(32 * MiB)));
  setRss(400 * MiB);
  memory.sample();
  memory.sample();
  memory.sample(); // busy: the retries are dropped
  memory.sample();
  memory.sample();
  t.equal(calls.gc, 2, "a busy sample cancels them (the next return needs idleness and growth)");
});

t.test("a failing release hook is reported, the others still run", async (t) => {
  const logged: string[] = [];
  let second = 0;
  const memory = new IdleMemory({
    gc: () => {},
    release: [
      () => {
        throw new Error("db closed");
      },
      () => void second++,
    ],
    log: (m) => logged.push(m),
  });
  memory.returnMemory();
  t.equal(second, 1);
  t.match(logged, [/db closed/]);
});

t.test("the real collection frees what is unreachable, without --expose-gc", async (t) => {
  t.equal(typeof fullGc(), "function");
  let garbage: number[][] | undefined = Array.from({ length: 200 }, () => Array.from({ length: 20_000 }, (_, i) => i));
  const withGarbage = process.memoryUsage().heapUsed;
  t.ok(garbage.length === 200);
  garbage = undefined;
  new IdleMemory({ minGrowthBytes: 0 }).returnMemory();
  const after = process.memoryUsage().heapUsed;
  t.ok(after < withGarbage - 16 * MiB, `heap used fell from ${Math.round(withGarbage / MiB)} MiB to ${Math.round(after / MiB)} MiB`);
});

t.test("start samples on a timer that keeps nothing alive; stop ends the sampling", async (t) => {
  let samples = 0;
  let sampled = () => {};
  const memory = new IdleMemory({
    sampleMs: 5,
    utilization: () => {
      samples++;
      sampled();
      return 1;
    },
  });
  const timers = () => process.getActiveResourcesInfo().filter((r) => r === "Timeout").length;
  const before = timers();
  memory.start();
  memory.start(); // a second start is a no-op
  t.equal(timers(), before, "the sampling timer does not keep the process alive");
  // The test holds the process alive itself while it waits (the sampling timer does not).
  const keepAlive = setInterval(() => {}, 1_000);
  t.teardown(() => clearInterval(keepAlive));
  await new Promise<void>((resolve) => (sampled = () => samples >= 3 && resolve()));
  memory.stop();
  memory.stop();
  const atStop = samples;
  // No event marks the absence of a sample: a window ten sampling periods long.
  await new Promise((resolve) => setTimeout(resolve, 50));
  t.equal(samples, atStop, "no sample after stop");
});
