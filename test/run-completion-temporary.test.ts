import t from "tap";
import { completeOnThread, type CompletionDeps } from "../src/runtime/run-completion.js";
import type { RunRecord } from "../src/domain/run-record.js";
import type { RunEnded } from "../src/domain/runs.js";

/**
 * The removal of a stateless run's temporary thread deletes that thread only: when the id was
 * deleted meanwhile and created again (a new incarnation, someone else's), the run's end leaves it.
 */

const run = { run_id: "r1", thread_id: "t1", created_at: "2026-01-01T00:00:10.000+00:00", kwargs: { temporary: true } } as unknown as RunRecord;
const ended = { status: "success" } as unknown as RunEnded;

function depsWith(threadCreatedAt: string) {
  const appended: string[] = [];
  const deps = {
    store: {
      append: async (_stream: string, events: { type: string }[]) => {
        appended.push(...events.map((e) => e.type));
        return { position: BigInt(appended.length) };
      },
      headPosition: async () => BigInt(appended.length),
    },
    readModels: {
      runner: { waitFor: async () => undefined },
      threads: { load: () => ({ revision: 3n, deleted: false, activeRuns: [], thread: { created_at: threadCreatedAt } }) },
    },
    now: () => "2026-01-01T00:01:00.000+00:00",
    deleteThreadCheckpoints: async () => {
      appended.push("checkpoints deleted");
    },
  } as unknown as CompletionDeps;
  return { deps, appended };
}

t.test("the run's own temporary thread is deleted with its checkpoints", async (t) => {
  const { deps, appended } = depsWith("2026-01-01T00:00:10.000+00:00");
  await completeOnThread(deps, run, ended, undefined);
  t.same(appended, ["RunFinished", "ThreadDeleted", "checkpoints deleted"]);
});

t.test("a thread created after the run is a new incarnation of the id: left as it is", async (t) => {
  const { deps, appended } = depsWith("2026-01-01T00:00:30.000+00:00");
  await completeOnThread(deps, run, ended, undefined);
  t.same(appended, ["RunFinished"]);
});
