import t from "tap";
import { ResourceStack } from "../../src/util/resource-stack.js";

/** The stack server.ts builds its parts on and tears them down from. */

t.test("closes in the reverse order of registration, each failure reported, the rest still closed", async (t) => {
  const closed: string[] = [];
  const failures: string[] = [];
  const stack = new ResourceStack((name, error) => failures.push(`${name}: ${(error as Error).message}`));
  const store = stack.use("store", { name: "log" }, (s) => void closed.push(s.name));
  t.same(store, { name: "log" }, "use returns the resource");
  stack.use("read models", "rm", async () => {
    await new Promise((resolve) => setImmediate(resolve));
    closed.push("read models");
  });
  stack.defer("http", () => {
    closed.push("http");
    throw new Error("boom");
  });
  stack.defer("worker", async () => {
    closed.push("worker");
    throw new Error("stuck");
  });
  await stack.close();
  t.same(closed, ["worker", "http", "read models", "log"], "last built, first closed; an async closer is awaited before the next");
  t.same(failures, ["worker: stuck", "http: boom"]);
});

t.test("close runs once however often it is called; nothing registers after", async (t) => {
  let runs = 0;
  const stack = new ResourceStack(() => t.fail("no failure expected"));
  stack.defer("part", () => void runs++);
  const [a, b] = [stack.close(), stack.close()];
  t.equal(a, b, "the same promise");
  await a;
  await stack.close();
  t.equal(runs, 1);
  t.throws(() => stack.defer("late", () => undefined), /cannot register late: already closing/);
});

t.test("an empty stack closes at once", async (t) => {
  const stack = new ResourceStack(() => undefined);
  t.equal(stack.isClosing, false);
  await stack.close();
  t.equal(stack.isClosing, true, "closed");
});

t.test("a closer still running after slowMs is reported by name, until it ends", async (t) => {
  const slow: string[] = [];
  let finish!: () => void;
  const stack = new ResourceStack(
    () => t.fail("no failure expected"),
    (name) => slow.push(name),
    20,
  );
  stack.defer("quick", () => undefined);
  const stuck = new Promise<void>((resolve) => (finish = resolve));
  stack.defer("stuck", () => stuck);
  const closing = stack.close();
  // Reported while it runs (awaited: the report is the event), then no more once it ended.
  while (slow.length < 2) await new Promise((resolve) => setTimeout(resolve, 5));
  finish();
  await closing;
  const reported = slow.length;
  await new Promise((resolve) => setTimeout(resolve, 60));
  t.same([...new Set(slow)], ["stuck"], "only the part that hangs is named");
  t.equal(slow.length, reported, "no report after it ended");
});
