import t from "tap";
import fc from "fast-check";
import { startTestServer } from "../support/server.js";

/**
 * Property: for random command sequences through the API, replaying the log at the position
 * reached after each step gives what the API answered then (values, status, runs).
 */

type Command = { kind: "run"; word: string } | { kind: "patch"; n: number } | { kind: "deleteRun" };
const command: fc.Arbitrary<Command> = fc.oneof(
  fc.record({ kind: fc.constant("run" as const), word: fc.constantFrom("alpha", "beta", "gamma", "δέλτα") }),
  fc.record({ kind: fc.constant("patch" as const), n: fc.integer({ min: 0, max: 9 }) }),
  fc.record({ kind: fc.constant("deleteRun" as const) }),
);

t.test("replay at every step equals what the API answered", async (t) => {
  const srv = await startTestServer();
  t.teardown(() => srv.close());
  const { client, url } = srv;
  const head = async () => ((await (await fetch(`${url}/info`)).json()) as { store: { head_position: string } }).store.head_position;

  await fc.assert(
    fc.asyncProperty(fc.array(command, { minLength: 1, maxLength: 5 }), async (commands) => {
      const thread = await client.threads.create({ metadata: { property: true } });
      const seen: { position: string; values: unknown; status: string; runs: [string, string][] }[] = [];
      for (const c of commands) {
        if (c.kind === "run") await client.runs.wait(thread.thread_id, "agent", { input: { messages: [{ role: "user", content: c.word }] } });
        else if (c.kind === "patch") await client.threads.update(thread.thread_id, { metadata: { n: c.n } });
        else {
          const [last] = await client.runs.list(thread.thread_id, { limit: 1 });
          if (last) await client.runs.delete(thread.thread_id, last.run_id);
        }
        const now = await client.threads.get(thread.thread_id);
        const runs = await client.runs.list(thread.thread_id, { limit: 100 });
        seen.push({ position: await head(), values: now.values, status: now.status, runs: runs.map((r) => [r.run_id, r.status] as [string, string]).sort() });
      }
      for (const step of seen) {
        const replay = (await (await fetch(`${url}/threads/${thread.thread_id}/replay?at=${step.position}`)).json()) as {
          thread: { values: unknown; status: string };
          runs: { run_id: string; status: string }[];
        };
        if (JSON.stringify(replay.thread.values) !== JSON.stringify(step.values)) throw new Error(`values differ at ${step.position}`);
        if (replay.thread.status !== step.status) throw new Error(`status ${replay.thread.status} ≠ ${step.status} at ${step.position}`);
        const runs = replay.runs.map((r) => [r.run_id, r.status]).sort();
        if (JSON.stringify(runs) !== JSON.stringify(step.runs))
          throw new Error(`runs differ at ${step.position}: ${JSON.stringify(runs)} ≠ ${JSON.stringify(step.runs)}`);
      }
    }),
    { numRuns: 8 },
  );
  t.pass("replayed every step of every sequence");
});
