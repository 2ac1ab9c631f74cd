import t from "tap";
import { WakeLoop } from "../../src/context/wake-loop.js";
import { MAX_TIMER_MS } from "../../src/context/clock.js";
import { FakeClock } from "../support/fake-clock.js";

/** The one timer loop of the schedulers and sweepers, on a fake clock: nothing waits for the wall clock. */

const T0 = Date.parse("2030-01-01T00:00:00Z");

/** A loop whose pass counts its runs and answers with `due()` (settable by the test). */
function counting(clock: FakeClock, due: () => number | undefined = () => undefined) {
  const state = { passes: 0 };
  const loop = new WakeLoop({
    clock,
    pass: () => {
      state.passes++;
      return due();
    },
  });
  return { loop, state };
}

/** A promise the test resolves when it chooses. */
function gate(): { promise: Promise<void>; open(): void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

t.test("a pass arms the timer at the due time it returns; the timer runs the next pass", async (t) => {
  const clock = new FakeClock(T0);
  let due: number | undefined = T0 + 5_000;
  const { loop, state } = counting(clock, () => due);
  await loop.run();
  t.equal(state.passes, 1);
  t.same(clock.pending(), [T0 + 5_000], "one timer, at the due time");
  t.equal(loop.nextDue, T0 + 5_000);
  await clock.advance(4_999);
  t.equal(state.passes, 1, "not before it is due");
  due = undefined;
  await clock.advance(1);
  t.equal(state.passes, 2, "the timer ran a pass");
  t.same(clock.pending(), [], "nothing due: no timer");
  t.equal(loop.nextDue, undefined);
});

t.test("a due time beyond setTimeout's range is reached by re-arming, without a pass on the way", async (t) => {
  const clock = new FakeClock(T0);
  const far = T0 + 2 * MAX_TIMER_MS + 10;
  let due: number | undefined = far;
  const { loop, state } = counting(clock, () => due);
  await loop.run();
  t.same(clock.pending(), [T0 + MAX_TIMER_MS], "capped at MAX_TIMER_MS");
  await clock.advance(MAX_TIMER_MS);
  t.equal(state.passes, 1, "the early wake-up is not a pass");
  t.same(clock.pending(), [T0 + 2 * MAX_TIMER_MS], "armed again, still capped");
  await clock.advance(MAX_TIMER_MS);
  t.same(clock.pending(), [far], "then for the rest");
  due = undefined;
  await clock.advance(10);
  t.equal(state.passes, 2, "the pass runs when it is due");
});

t.test("the wakes of one turn coalesce into one pass", async (t) => {
  const clock = new FakeClock(T0);
  const { loop, state } = counting(clock);
  for (let i = 0; i < 50; i++) loop.wake();
  t.ok(loop.busy, "a pass is queued");
  await loop.idle();
  t.equal(state.passes, 1, "50 wakes, one pass");
  loop.wake();
  await loop.idle();
  t.equal(state.passes, 2, "a later wake, a later pass");
});

t.test("a wake during a pass runs exactly one more pass after it", async (t) => {
  const clock = new FakeClock(T0);
  const held = gate();
  const entered = gate();
  let passes = 0;
  let concurrent = 0;
  let maxConcurrent = 0;
  const loop = new WakeLoop({
    clock,
    pass: async () => {
      passes++;
      concurrent++;
      maxConcurrent = Math.max(maxConcurrent, concurrent);
      if (passes === 1) {
        entered.open();
        await held.promise;
      }
      concurrent--;
      return undefined;
    },
  });
  const first = loop.run();
  await entered.promise;
  loop.wake();
  loop.wake();
  const again = loop.run();
  t.equal(passes, 1, "the second pass waits for the first");
  held.open();
  await first;
  await again;
  t.equal(passes, 2, "one more pass for all the wakes meanwhile");
  t.equal(maxConcurrent, 1, "passes never overlap");
  await loop.idle();
  t.equal(passes, 2, "and no third");
});

t.test("run() during a pass resolves after the pass that follows it", async (t) => {
  const clock = new FakeClock(T0);
  const held = gate();
  const seen: number[] = [];
  const loop = new WakeLoop({
    clock,
    pass: async () => {
      seen.push(clock.now());
      if (seen.length === 1) await held.promise;
      return undefined;
    },
  });
  void loop.run();
  await new Promise((resolve) => setImmediate(resolve));
  clock.set(T0 + 1_000);
  const later = loop.run();
  held.open();
  await later;
  t.same(seen, [T0, T0 + 1_000], "the caller's pass saw the time it was asked at");
});

t.test("dueAt moves the timer earlier, never later; told during a pass, the next timer honours it", async (t) => {
  const clock = new FakeClock(T0);
  const held = gate();
  let hold = false;
  const loop = new WakeLoop({
    clock,
    pass: async () => {
      if (hold) await held.promise;
      return T0 + 60_000;
    },
  });
  await loop.run();
  t.same(clock.pending(), [T0 + 60_000]);
  loop.dueAt(T0 + 90_000);
  t.same(clock.pending(), [T0 + 60_000], "a later due time leaves the timer");
  loop.dueAt(T0 + 10_000);
  t.same(clock.pending(), [T0 + 10_000], "an earlier one moves it, at once and without a pass");
  hold = true;
  const running = loop.run();
  await new Promise((resolve) => setImmediate(resolve));
  loop.dueAt(T0 + 5_000);
  held.open();
  await running;
  t.same(clock.pending(), [T0 + 5_000], "the earlier of the pass's answer and what was told meanwhile");
});

t.test("a failing pass is reported and tried again a second later", async (t) => {
  const clock = new FakeClock(T0);
  const errors: string[] = [];
  let fail = true;
  let passes = 0;
  const loop = new WakeLoop({
    clock,
    pass: () => {
      passes++;
      if (fail) throw new Error("store unavailable");
      return undefined;
    },
    onError: (error) => errors.push((error as Error).message),
  });
  await loop.run();
  t.same(errors, ["store unavailable"]);
  t.same(clock.pending(), [T0 + 1_000], "retried a second later");
  fail = false;
  await clock.advance(1_000);
  t.equal(passes, 2);
  t.same(clock.pending(), [], "recovered: nothing due");
});

t.test("stop() cancels the timer, awaits the pass in flight, and refuses new passes", async (t) => {
  const clock = new FakeClock(T0);
  const held = gate();
  const entered = gate();
  let passes = 0;
  let finished = false;
  const loop = new WakeLoop({
    clock,
    pass: async () => {
      passes++;
      if (passes === 2) {
        entered.open();
        await held.promise;
        finished = true;
      }
      return T0 + 60_000;
    },
  });
  await loop.run();
  t.same(clock.pending(), [T0 + 60_000]);
  void loop.run();
  await entered.promise;
  loop.wake(); // would run a third pass after this one
  let stopped = false;
  const stopping = loop.stop().then(() => (stopped = true));
  await new Promise((resolve) => setImmediate(resolve));
  t.notOk(stopped, "stop waits for the pass in flight");
  held.open();
  await stopping;
  t.ok(finished, "the pass in flight finished first");
  t.same(clock.pending(), [], "no timer left, nor armed by the pass that ended");
  loop.wake();
  loop.dueAt(T0 + 1);
  await loop.run();
  await loop.idle();
  t.equal(passes, 2, "no pass after stop");
  t.same(clock.pending(), []);
});
