import t from "tap";
import { TurnGate } from "../../src/util/turn-gate.js";

/** Counts turns of the event loop: 0 until the first check phase after the call, then one more per check phase. */
function turnCounter(turns: number): { readonly now: number } {
  const counter = { now: 0 };
  const tick = () => {
    counter.now++;
    if (counter.now < turns) setImmediate(tick);
  };
  setImmediate(tick);
  return counter;
}

t.test("lets perTurn callers through at once, the rest in order, perTurn a turn", async (t) => {
  const gate = new TurnGate(2);
  const passes = [gate.pass(), gate.pass(), gate.pass(), gate.pass(), gate.pass()];
  t.same(
    passes.map((p) => p === undefined),
    [true, true, false, false, false],
    "two go on now, three wait",
  );
  t.equal(gate.queued, 3);
  const turn = turnCounter(10);
  const order: number[] = [];
  const throughAt: number[] = [];
  await Promise.all(
    passes.map((p, i) =>
      p?.then(() => {
        order.push(i);
        throughAt[i] = turn.now;
      }),
    ),
  );
  t.same(order, [2, 3, 4], "in the order they asked");
  t.same(throughAt.slice(2), [0, 0, 1], "two in the next turn, the last one in the turn after");
  t.equal(gate.queued, 0);
});

t.test("a turn that let waiting callers through counts them against new ones", async (t) => {
  const gate = new TurnGate(2);
  t.equal(gate.pass(), undefined);
  t.equal(gate.pass(), undefined);
  const waiting = gate.pass();
  t.ok(waiting, "the third waits");
  await waiting;
  // This turn let one through already: one more may go on now, the next waits.
  t.equal(gate.pass(), undefined, "one more in this turn");
  const next = gate.pass();
  t.ok(next, "then the turn is full");
  await next;
  t.equal(gate.queued, 0);
});

t.test("a new turn starts empty once the waiting are through", async (t) => {
  const gate = new TurnGate(1);
  t.equal(gate.pass(), undefined);
  await new Promise((resolve) => setImmediate(resolve));
  await new Promise((resolve) => setImmediate(resolve));
  t.equal(gate.pass(), undefined, "a later turn lets one through at once");
});

t.test("perTurn must be a positive integer", async (t) => {
  for (const bad of [0, -1, 1.5, Number.NaN]) t.throws(() => new TurnGate(bad), RangeError, String(bad));
});
