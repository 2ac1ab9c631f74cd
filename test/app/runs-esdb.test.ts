import t from "tap";
import { Client } from "@langchain/langgraph-sdk";
import { startEsdbTestDouble } from "../support/esdb-test-double.js";
import { spawnServerOfTest } from "../support/process.js";
import { TEST_GRAPHS } from "../support/server.js";
import { openStore } from "../../src/eventstore/open.js";
import { runStream } from "../../src/domain/runs.js";
import { claimCounts } from "../support/metrics.js";

/**
 * Two server processes on one EventStoreDB (the test double: the real client and wire protocol over
 * an in-memory log). Both workers see every run; each run is claimed once and ended once. When the
 * process running a run dies, the other takes the run over once its lease expired and resumes it.
 */

t.test("two processes share one EventStoreDB", async (t) => {
  const esdb = await startEsdbTestDouble();
  t.teardown(() => esdb.close());
  const env = { EVENTSTORE_URL: esdb.connectionString, LANGGRAPH_JSON: TEST_GRAPHS, RUN_LEASE_SECS: "2" };
  // Each process keeps its own read models (disposable caches of the shared log).
  const start = async () => {
    const p = await spawnServerOfTest(t, env);
    return { proc: p, client: new Client({ apiUrl: p.url! }) };
  };
  const store = await openStore({ dataDir: "", eventstoreUrl: esdb.connectionString });
  t.teardown(() => store.close());

  const a = await start();
  const b = await start();

  t.test("each run claimed and ended exactly once", async (t) => {
    const runs = [];
    for (let i = 0; i < 12; i++) {
      const thread = await a.client.threads.create();
      runs.push(await a.client.runs.create(thread.thread_id, "agent", { input: { messages: [{ role: "user", content: `m${i}` }] } }));
    }
    for (const r of runs) {
      const values = (await b.client.runs.join(r.thread_id, r.run_id)) as { messages: { content: string }[] };
      t.equal(values.messages.length, 2, "joined through the other process");
    }
    const owners = new Set<string>();
    for (const r of runs) {
      const events = await store.readStream(runStream(r.run_id));
      const claims = events.filter((e) => e.type === "RunClaimed");
      t.equal(claims.length, 1);
      t.equal(events.filter((e) => e.type === "RunEnded").length, 1);
      owners.add((claims[0].data as { owner: string }).owner);
    }
    t.comment(`owners: ${owners.size}`);
    // Both workers saw every run: each claim one of them won, the other's (when it tried) was refused by the log.
    const counts = [await claimCounts(a.proc.url!, "run"), await claimCounts(b.proc.url!, "run")];
    t.equal(counts[0].won + counts[1].won, runs.length, `one claim won per run: ${JSON.stringify(counts)}`);
    t.ok(counts[0].lost + counts[1].lost > 0, "the other process really tried, and lost");
  });

  t.test("streams tail the run stream on EventStoreDB too (live and with Last-Event-ID)", async (t) => {
    const thread = await b.client.threads.create();
    let runId = "";
    const parts = [];
    for await (const p of b.client.runs.stream(thread.thread_id, "agent", {
      input: { messages: [{ role: "user", content: "s" }] },
      streamMode: ["updates"],
      onRunCreated: (m) => (runId = m.run_id),
    }))
      parts.push({ event: p.event, data: p.data, id: p.id });
    t.same(
      parts.map((p) => p.event),
      ["metadata", "updates"],
    );
    const replay = [];
    for await (const p of a.client.runs.joinStream(thread.thread_id, runId, { lastEventId: parts[0].id }))
      replay.push({ event: p.event, data: p.data, id: p.id });
    t.same(replay, parts.slice(1), "resumed through the other process");
  });

  t.test("kill -9 of the owner: the other process takes the run over after its lease", async (t) => {
    // Only the victim is up when the run starts, so it is the owner.
    b.proc.child.kill("SIGTERM");
    await b.proc.exited;
    const thread = await a.client.threads.create();
    const run = await a.client.runs.create(thread.thread_id, "delay", { input: { delay: 4_000, messages: [{ role: "user", content: "x" }] } });
    for await (const part of a.client.runs.joinStream(thread.thread_id, run.run_id, { lastEventId: "-1" })) if (part.event === "metadata") break;
    t.equal((await a.client.runs.get(thread.thread_id, run.run_id)).status, "running", "still running when its owner dies");
    a.proc.child.kill("SIGKILL");
    await a.proc.exited;
    // Started only after the kill, so how long a process takes to start cannot decide the outcome.
    const c = await start();
    const values = (await c.client.runs.join(thread.thread_id, run.run_id)) as { messages: { content: string }[] };
    t.same(
      values.messages.map((m) => m.content),
      ["x", "waited 4000ms"],
    );
    t.equal((await c.client.runs.get(thread.thread_id, run.run_id)).status, "success");
    const claims = (await store.readStream(runStream(run.run_id)))
      .filter((e) => e.type === "RunClaimed")
      .map((e) => e.data as { attempt: number; recovered_from?: string });
    t.equal(claims.length, 2);
    t.match(claims[1], { attempt: 2, recovered_from: String });
  });
});
