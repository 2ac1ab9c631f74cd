import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import t from "tap";
import { Client } from "@langchain/langgraph-sdk";
import { spawnServer } from "../support/process.js";
import { TEST_GRAPHS } from "../support/server.js";

/**
 * Crash recovery: the server process is killed with SIGKILL while runs execute; a new process on
 * the same data directory resumes every claimed run from its last checkpoint (or ends it with a
 * reason), runs nobody claimed yet still run, and nothing acknowledged is lost.
 */

t.test("kill -9 while runs execute, restart on the same data directory", async (t) => {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), "agent-server-recovery-"));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const env = { DATA_DIR: dataDir, LANGGRAPH_JSON: TEST_GRAPHS, N_JOBS_PER_WORKER: "2" };

  const first = await spawnServer(env);
  t.ok(first.url, `started: ${first.stderr}`);
  const client = new Client({ apiUrl: first.url! });
  const threads = [];
  for (let i = 0; i < 3; i++) threads.push(await client.threads.create({ metadata: { i } }));
  // Two run at once (N_JOBS_PER_WORKER=2); the third waits for a slot; a fourth is enqueued behind the first.
  const runs = [];
  for (const th of threads)
    runs.push(await client.runs.create(th.thread_id, "delay", { input: { delay: 4_000, messages: [{ role: "user", content: `r${th.metadata?.i}` }] } }));
  const queued = await client.runs.create(threads[0].thread_id, "agent", { input: { messages: [{ role: "user", content: "after" }] } });
  for (const r of runs.slice(0, 2)) {
    for await (const part of client.runs.joinStream(r.thread_id, r.run_id, { lastEventId: "-1" })) if (part.event === "metadata") break;
  }
  t.same(
    (await Promise.all(runs.map((r) => client.runs.get(r.thread_id, r.run_id)))).map((r) => r.status),
    ["running", "running", "pending"],
  );

  first.child.kill("SIGKILL");
  const exit = await first.exited;
  t.equal(exit.signal, "SIGKILL");

  const second = await spawnServer(env);
  t.ok(second.url, `restarted: ${second.stderr}`);
  t.teardown(async () => {
    second.child.kill("SIGTERM");
    await second.exited;
  });
  const again = new Client({ apiUrl: second.url! });

  for (const th of threads) t.ok(await again.threads.get(th.thread_id), "acknowledged threads survive");
  for (const r of [...runs, queued]) {
    const values = (await again.runs.join(r.thread_id, r.run_id)) as { messages: { content: string }[] };
    t.ok(values.messages.length >= 2, `run ${r.run_id} produced its reply`);
  }
  const after = await Promise.all([...runs, queued].map((r) => again.runs.get(r.thread_id, r.run_id)));
  t.same(
    after.map((r) => r.status),
    ["success", "success", "success", "success"],
    "none stays pending or running",
  );
  for (const th of threads) t.equal((await again.threads.get(th.thread_id)).status, "idle");

  const resumed = [];
  for await (const part of again.runs.joinStream(runs[0].thread_id, runs[0].run_id, { lastEventId: "-1" })) resumed.push(part);
  t.same(
    resumed.filter((p) => p.event === "metadata").map((p) => (p.data as { attempt: number }).attempt),
    [1, 2],
    "a second attempt on the same stream",
  );
  const state = await again.threads.getState(runs[0].thread_id);
  const contents = (state.values as { messages: { content: string }[] }).messages.map((m) => m.content);
  t.same(contents, ["r0", "waited 4000ms", "after", "You said: after"], "resumed from its checkpoint: input not duplicated; the queued run ran after it");
});
