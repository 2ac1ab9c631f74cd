import t from "tap";
import { runStream } from "../../src/domain/runs.js";
import { inProcessCore } from "../support/in-process-core.js";

/**
 * What /wait and /join answer comes from the run stream's terminal event: usually its last event,
 * but a lease renewal may race past it. Both are found, also once the run's first events have left
 * the log's memory of recent events (a read of several events from the end then needs the table).
 */
t.test("the terminal event: the last one, one a renewal raced past, or none yet", async (t) => {
  const core = await inProcessCore();
  t.teardown(() => core.close());
  const { store, runs } = core;
  const claimed = (owner: string) => ({
    type: "RunClaimed",
    data: { owner, attempt: 1, claimed_at: new Date().toISOString(), lease_expires_at: Date.now() + 30_000 },
  });
  const ended = (values: unknown) => ({ type: "RunEnded", data: { status: "success", values, ended_at: new Date().toISOString() } });

  const plain = "01900000-0000-7000-8000-000000000001";
  await store.append(runStream(plain), [claimed("w"), { type: "RunOutput", data: { event: "values", data: { n: 1 } } }, ended({ n: 1 })], "no_stream");
  t.same((await runs.lifecycle.terminalEvent(plain))?.values, { n: 1 }, "the last event");

  const raced = "01900000-0000-7000-8000-000000000002";
  await store.append(runStream(raced), [claimed("w"), ended({ n: 2 })], "no_stream");
  await store.append(runStream(raced), [{ type: "RunLeaseRenewed", data: { owner: "w", lease_expires_at: Date.now() + 60_000 } }], 1n);
  t.same((await runs.lifecycle.terminalEvent(raced))?.values, { n: 2 }, "found behind a renewal");

  const open = "01900000-0000-7000-8000-000000000003";
  await store.append(runStream(open), [claimed("w")], "no_stream");
  t.equal(await runs.lifecycle.terminalEvent(open), undefined, "not ended yet");
  t.equal(await runs.lifecycle.terminalEvent("01900000-0000-7000-8000-000000000004"), undefined, "no such run");

  // Enough other events that the runs' first events are no longer held in memory.
  for (let i = 0; i < 8; i++)
    await store.append(
      `filler-${i}`,
      Array.from({ length: 100 }, () => ({ type: "RunOutput", data: { event: "values", data: {} } })),
      "any",
    );
  t.same((await runs.lifecycle.terminalEvent(plain))?.values, { n: 1 }, "the last event, from the table");
  t.same((await runs.lifecycle.terminalEvent(raced))?.values, { n: 2 }, "behind a renewal, from the table");
  t.equal(await runs.lifecycle.terminalEvent(open), undefined, "still not ended");
});
