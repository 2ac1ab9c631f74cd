import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import t from "tap";
import { countNodeInstructions, instructionsUnavailable, serverLifeInstructions } from "../support/instructions.js";

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

t.test(
  "serverLifeInstructions: a server's life, driven once it listens, counts the work its requests add",
  { skip: !process.env.CI && noValgrind },
  async (t) => {
    t.notOk(noValgrind, "valgrind is installed");
    const dir = await mkdtemp(path.join(os.tmpdir(), "insn-server-"));
    t.teardown(() => rm(dir, { recursive: true, force: true }));
    // A server that prints its listening line as ours does, and does a fixed amount of work per request.
    const script = path.join(dir, "server.mjs");
    await writeFile(
      script,
      `import http from "node:http";
const server = http.createServer((req, res) => { let s = 0; for (let i = 0; i < 200000; i++) s += i; res.end(String(s)); });
server.listen(0, "127.0.0.1", () => console.log("listening on http://127.0.0.1:" + server.address().port));
process.on("SIGTERM", () => server.close(() => process.exit(0)));
`,
    );
    const requests = (n: number) => async (url: string) => {
      for (let i = 0; i < n; i++) await (await fetch(url)).text();
    };
    const few = await serverLifeInstructions(script, process.env, requests(2));
    const many = await serverLifeInstructions(script, process.env, requests(22));
    t.ok(many - few > 20 * 200_000, `20 more requests add ${many - few} instructions`);
    await t.rejects(
      serverLifeInstructions(script, process.env, async () => {
        throw new Error("the drive failed");
      }),
      /the drive failed/,
      "a failing drive is an error, not a count",
    );
  },
);
