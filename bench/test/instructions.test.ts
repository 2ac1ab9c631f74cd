import t from "tap";
import { countNodeInstructions, instructionsUnavailable } from "../support/instructions.js";

// Three node processes under callgrind, each about 30× slower than native (and tap's own hooks ride along).
t.setTimeout(300_000);

// In CI valgrind is installed by .ci/run: missing there is a failure, not a skip.
const noValgrind = instructionsUnavailable();

t.test("countNodeInstructions: a repeatable count that grows with the work done", { skip: !process.env.CI && noValgrind }, async (t) => {
  t.notOk(noValgrind, "valgrind is installed");
  const floor = await countNodeInstructions(["-e", "0"]);
  // A preload in NODE_OPTIONS that does not exist would fail the command: it is left out of the environment.
  const work = ["-e", "let s = 0; for (let i = 0; i < 5e6; i++) s += i; if (s < 0) console.log(s)"];
  const loop = await countNodeInstructions(work, { ...process.env, NODE_OPTIONS: "--require ./no-such-preload.cjs" });
  const again = await countNodeInstructions(work);
  t.ok(floor > 2e7, `node -e 0: ${floor} instructions`);
  t.ok(loop - floor > 5e6, `a loop of 5,000,000 iterations adds ${loop - floor}`);
  // In V8's predictable mode counts of one command repeat within 0.01 % even while other processes load the machine
  // (without it they drifted by 2-4 %, as concurrent compilation raced the loop).
  t.ok(Math.abs(again - loop) / loop < 0.005, `the same command twice: ${loop} and ${again}`);
  await t.rejects(countNodeInstructions(["--no-such-flag"]), /ended 9/, "a failing command is an error, not a count");
});
