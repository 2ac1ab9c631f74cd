import t from "tap";
import { RunWorker } from "../../src/runtime/worker.js";
import { runStream, type RunView } from "../../src/domain/runs.js";
import { SYSTEM_CALLER } from "../../src/app/auth/caller.js";
import { inProcessCore } from "../support/in-process-core.js";

/**
 * Several workers on one store (as several processes on one EventStoreDB would be): every run is
 * claimed by exactly one of them and ended exactly once; a worker whose lease expired is taken over.
 */

t.test("workers sharing a store", async (t) => {
  const core = await inProcessCore();
  const { store, readModels, checkpointer, graphs, completion, runs } = core;
  const worker = (owner: string, leaseMs = 30_000, runTimeoutMs?: number) =>
    new RunWorker({ ...completion, graphs, checkpointer, maxConcurrentRuns: 3, exclusiveStore: false, owner, leaseMs, runTimeoutMs });
  const workers = [worker("w1"), worker("w2")];
  t.teardown(async () => {
    for (const w of workers) await w.stop();
    await core.close();
  });
  for (const w of workers) await w.start();

  t.test("exactly one claim and one end per run", async (t) => {
    const created = [];
    for (let i = 0; i < 24; i++) {
      created.push(
        await runs.create(
          await runs.authorize(SYSTEM_CALLER, null, {
            assistant_id: "agent",
            input: { messages: [{ role: "user", content: `m${i}` }] },
            on_completion: "keep",
          }),
        ),
      );
    }
    await Promise.all(created.map((r) => runs.lifecycle.waitDone(r.run_id)));
    const owners = new Set<string>();
    for (const r of created) {
      const events = await store.readStream(runStream(r.run_id));
      const claims = events.filter((e) => e.type === "RunClaimed");
      t.equal(claims.length, 1, `one claim for ${r.run_id}`);
      t.equal(events.filter((e) => e.type === "RunEnded").length, 1);
      owners.add((claims[0].data as { owner: string }).owner);
      t.equal(runs.view(r.run_id)?.stream.ended?.status, "success");
    }
    t.ok(owners.size >= 1, `owners: ${[...owners].join(",")}`);
    // Both workers hear of every run: the one whose claim the log refused really tried and lost.
    const [w1, w2] = workers.map((w) => w.stats);
    t.equal(w1.claimed + w2.claimed, created.length, `one claim won per run: ${JSON.stringify([w1, w2])}`);
    t.ok(w1.lost + w2.lost > 0, "the other worker really tried, and lost");
  });

  t.test("a run whose owner stopped renewing is taken over after its lease", async (t) => {
    const mortal = worker("mortal", 200);
    // The lease timers are unref'd (a server's sockets keep it alive); here nothing else would.
    const keepAlive = setInterval(() => undefined, 1_000);
    t.teardown(() => clearInterval(keepAlive));
    // Only the mortal worker may take the run.
    for (const w of workers) await w.stop();
    workers.length = 0;
    await mortal.start();
    const run = await runs.create(await runs.authorize(SYSTEM_CALLER, null, { assistant_id: "delay", input: { delay: 60_000 }, on_completion: "keep" }));
    const sub = store.subscribeToStream(runStream(run.run_id));
    let stage = 0;
    let heir: RunWorker | undefined;
    for await (const item of sub) {
      if (item.kind !== "event" || item.event.type !== "RunClaimed") continue;
      const claim = item.event.data as { owner: string; recovered_from?: string; attempt: number };
      if (stage === 0) {
        t.equal(claim.owner, "mortal");
        stage = 1;
        await mortal.stop(); // dies: its claim stays open, nobody renews the lease
        heir = worker("heir", 200);
        workers.push(heir);
        await heir.start();
      } else {
        t.match(claim, { owner: "heir", recovered_from: "mortal", attempt: 2 });
        break;
      }
    }
    await sub.close();
    await runs.cancel(null, run.run_id, "interrupt");
    await runs.lifecycle.waitDone(run.run_id);
    t.equal((await runs.lifecycle.terminalEvent(run.run_id))?.status, "interrupted");
  });

  t.test("a takeover chosen from read models that are behind is not claimed once the log shows a live owner", async (t) => {
    for (const w of workers) await w.stop();
    workers.length = 0;
    const keepAlive = setInterval(() => undefined, 1_000);
    t.teardown(() => clearInterval(keepAlive));
    const first = worker("first", 200);
    await first.start();
    const run = await runs.create(await runs.authorize(SYSTEM_CALLER, null, { assistant_id: "delay", input: { delay: 60_000 }, on_completion: "keep" }));
    const sub = store.subscribeToStream(runStream(run.run_id));
    let behind: RunView | undefined;
    for await (const item of sub) {
      if (item.kind !== "event" || item.event.type !== "RunClaimed") continue;
      const claim = item.event.data as { owner: string; recovered_from?: string };
      if (claim.owner === "first") {
        await readModels.runner.waitFor(item.event.position);
        behind = runs.view(run.run_id); // what a process whose read models stop here sees: first's claim
        await first.stop(); // dies: its lease runs out
        const heir = worker("heir", 600);
        workers.push(heir);
        await heir.start();
      } else {
        t.match(claim, { owner: "heir", recovered_from: "first" });
        break;
      }
    }
    await sub.close();
    t.equal(behind?.stream.owner, "first");
    // A process whose read models are behind the heir's claim: they still show first's lease, expired.
    const staleRuns = Object.assign(Object.create(readModels.runs) as typeof readModels.runs, {
      load: (id: string) => (id === run.run_id ? behind : readModels.runs.load(id)),
      openClaims: () => [behind!],
    });
    const late = new RunWorker({
      ...completion,
      readModels: { ...readModels, runs: staleRuns },
      graphs,
      checkpointer,
      maxConcurrentRuns: 3,
      exclusiveStore: false,
      owner: "late",
      leaseMs: 200,
    });
    await late.start(); // its recovery sees an expired lease in the stale view and tries the takeover
    await late.stop(); // and is done trying
    const claims = (await store.readStream(runStream(run.run_id))).filter((e) => e.type === "RunClaimed").map((e) => (e.data as { owner: string }).owner);
    t.same(claims, ["first", "heir"], "the heir, whose lease the log shows live, keeps the run");
    await runs.cancel(null, run.run_id, "interrupt");
    await runs.lifecycle.waitDone(run.run_id);
  });

  t.test("a run longer than the timeout is aborted and ends with status timeout", async (t) => {
    for (const w of workers) await w.stop();
    workers.length = 0;
    const strict = worker("strict", 30_000, 150);
    workers.push(strict);
    await strict.start();
    const run = await runs.create(await runs.authorize(SYSTEM_CALLER, null, { assistant_id: "delay", input: { delay: 60_000 }, on_completion: "keep" }));
    await runs.lifecycle.waitDone(run.run_id);
    t.match(await runs.lifecycle.terminalEvent(run.run_id), { status: "timeout", error: { error: "TimeoutError" } });
    const outputs = (await store.readStream(runStream(run.run_id))).filter((e) => e.type === "RunOutput").map((e) => (e.data as { event: string }).event);
    t.same(outputs, ["metadata", "values", "error"]);
  });

  t.test("a run whose workers keep dying is ended with an error after MAX_ATTEMPTS", async (t) => {
    for (const w of workers) await w.stop();
    workers.length = 0;
    const keepAlive = setInterval(() => undefined, 1_000);
    t.teardown(() => clearInterval(keepAlive));
    const dying = (n: number) => new RunWorker({ ...completion, graphs, checkpointer, maxConcurrentRuns: 1, exclusiveStore: true, owner: `dying-${n}` });
    let current = dying(1);
    await current.start();
    const run = await runs.create(await runs.authorize(SYSTEM_CALLER, null, { assistant_id: "delay", input: { delay: 60_000 }, on_completion: "keep" }));
    const sub = store.subscribeToStream(runStream(run.run_id));
    const attempts: number[] = [];
    let n = 1;
    for await (const item of sub) {
      if (item.kind !== "event") continue;
      if (item.event.type === "RunClaimed") {
        attempts.push((item.event.data as { attempt: number }).attempt);
        await current.stop(); // dies with its claim open
        // A fresh process starts with its read models caught up with the log.
        await readModels.runner.waitFor(item.event.position);
        current = dying(++n);
        workers.push(current);
        await current.start(); // a fresh process on an exclusive store takes over at once
      }
      if (item.event.type === "RunEnded") break;
    }
    await sub.close();
    t.same(attempts, [1, 2, 3, 4]);
    await runs.lifecycle.waitDone(run.run_id);
    t.match(await runs.lifecycle.terminalEvent(run.run_id), { status: "error", error: { error: "RunAttemptsExhausted" } });
    const outputs = (await store.readStream(runStream(run.run_id))).filter((e) => e.type === "RunOutput").map((e) => (e.data as { event: string }).event);
    t.equal(outputs[outputs.length - 1], "error");
  });
});
