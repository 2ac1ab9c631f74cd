import t from "tap";
import { Client } from "@langchain/langgraph-sdk";
import { human, startRig, within } from "../support/esdb-outage.js";
import { firstEventOf } from "../support/log.js";
import { allSettled, runLog, sleep, sseLines } from "../support/chaos.js";
import { gates as makeGates } from "../support/gates.js";
import { openStore } from "../../src/eventstore/open.js";
import { runStream } from "../../src/domain/runs.js";

/**
 * A network blip under load: 50 runs in flight on one server process, every connection between it
 * and EventStoreDB (the test double, behind a TCP proxy) cut for 3 s, then healed. Every run must
 * end `success`, claimed, started and ended once, with the outputs of an undisturbed run; every
 * SSE client (one per run, joined through the SDK) must see each output of its run exactly once.
 * Each run waits at a gate: half are let go during the cut (their graphs end, their appends wait for
 * the heal), the others after it, however long the machine took to get them all in flight.
 */

t.setTimeout(90_000);

const RUNS = 50;
const CUT_MS = 3_000;

t.test("a 3 s blip during 50 runs in flight: every run succeeds once, every SSE client sees every event once", async (t) => {
  // Every run in flight at once: one slot each.
  const rig = await startRig(t, { N_JOBS_PER_WORKER: String(RUNS) });
  // The test's own connection to the double (the proxy cuts only the server's).
  const log = await openStore({ dataDir: "", eventstoreUrl: rig.esdb.connectionString });
  t.teardown(() => log.close());
  const client = new Client({ apiUrl: rig.url });

  // An undisturbed run shows what each run must write.
  const control = await client.threads.create();
  const controlRun = await client.runs.create(control.thread_id, "delay", {
    input: { delay: 10, messages: [human("control")] },
    streamMode: ["values", "updates"],
  });
  await client.runs.join(control.thread_id, controlRun.run_id);
  const expected = await runLog(log, controlRun.run_id);
  t.match(expected, { claims: 1, starts: 1, ends: 1, status: "success" });

  // Every run waits at its gate until the test opens it.
  const gates = makeGates(t);
  const createdAt = Date.now();
  const runs = await allSettled(
    Array.from({ length: RUNS }, async (_, i) => {
      const thread = await client.threads.create();
      return client.runs.create(thread.thread_id, "delay", {
        input: { gate: gates.path(`r${i}`), messages: [human(`r${i}`)] },
        streamMode: ["values", "updates"],
      });
    }),
  );
  const streams = runs.map((r) => sseLines(client, r.thread_id, r.run_id));
  // In flight: each run claimed (its first output written) and none ended.
  await allSettled(runs.map((r) => firstEventOf(log, runStream(r.run_id), ["RunClaimed"])));
  const before = await allSettled(runs.map((r) => runLog(log, r.run_id)));
  t.equal(before.filter((r) => r.ends > 0).length, 0, `all 50 runs in flight when the cut starts (${Date.now() - createdAt} ms after the first was created)`);

  rig.proxy.cut();
  const cutAt = Date.now();
  await within(5_000, "/ok non-200 while cut", async () => (await fetch(`${rig.url}/ok`)).status !== 200);
  // The first half end their graphs during the cut.
  for (let i = 0; i < RUNS / 2; i++) gates.open(`r${i}`);
  // The fault lasts 3 s: a duration, not a synchronisation.
  await sleep(CUT_MS - (Date.now() - cutAt));
  const endedDuringCut = (await allSettled(runs.map((r) => runLog(log, r.run_id)))).filter((r) => r.ends > 0).length;
  t.equal(endedDuringCut, 0, "no run could end while cut");
  rig.proxy.heal();
  for (let i = RUNS / 2; i < RUNS; i++) gates.open(`r${i}`);

  const seen = await allSettled(streams);
  await allSettled(runs.map((r) => firstEventOf(log, runStream(r.run_id), ["RunEnded"])));
  const logs = await allSettled(runs.map((r) => runLog(log, r.run_id)));
  const statuses = await allSettled(runs.map((r) => client.runs.get(r.thread_id, r.run_id)));
  t.same(
    statuses.map((s) => s.status),
    runs.map(() => "success"),
    "every run ended success (API)",
  );
  t.same(
    logs.map((l) => [l.claims, l.starts, l.ends, l.status]),
    runs.map(() => [1, 1, 1, "success"]),
    "every run claimed, started and ended once (log)",
  );
  t.same(
    logs.map((l) => l.outputs.map((o) => o.split(" ")[1])),
    runs.map(() => expected.outputs.map((o) => o.split(" ")[1])),
    "every run wrote the outputs of an undisturbed run, once",
  );
  t.same(
    seen,
    logs.map((l) => l.outputs),
    "every SSE client saw each output of its run once, in order (ids from the log revisions)",
  );
  const states = await allSettled(runs.map((r) => client.threads.getState<{ messages: { content: string }[] }>(r.thread_id)));
  t.same(
    states.map((s) => s.values.messages.length),
    runs.map(() => 2),
    "each thread holds its input and one reply",
  );

  const metrics = await (await fetch(`${rig.url}/metrics`)).text();
  t.match(metrics, /^agent_server_log_reconnects_total [1-9]\d*$/m, "the server saw the blip and reconnected");
  await within(5_000, "/ok 200 again", async () => (await fetch(`${rig.url}/ok`)).status === 200);
});
