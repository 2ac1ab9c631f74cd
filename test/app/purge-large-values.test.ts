import t from "tap";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import { spawnServer, stopServer } from "../support/process.js";
import { callJson } from "../support/http.js";

/**
 * Values too large for one event, written beside a thread and its runs (`run-input-`, `run-values-`,
 * `thread-values-` streams) or referenced in its runs' outputs: answers hold the values, copies keep
 * them after their source is purged, and a purge turns each of those events into a tombstone, like
 * the thread's own streams.
 */

/** Types of the events of each stream whose name starts with `prefix` and ends with `id`. */
function streamTypes(file: string, prefix: string, id: string): Record<string, string[]> {
  const db = new Database(file, { readonly: true });
  try {
    const rows = db.prepare("SELECT stream_id, type FROM events WHERE stream_id = ? ORDER BY position").all(`${prefix}${id}`) as {
      stream_id: string;
      type: string;
    }[];
    const out: Record<string, string[]> = {};
    for (const r of rows) (out[r.stream_id] ??= []).push(r.type);
    return out;
  } finally {
    db.close();
  }
}

t.test("a purge removes the large values written beside the thread and its runs", async (t) => {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), "purge-large-"));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const proc = await spawnServer({ DATA_DIR: dataDir });
  t.teardown(() => stopServer(proc));
  t.ok(proc.url, `the server started (stderr: ${proc.stderr})`);
  const url = proc.url!;

  const thread = await callJson<{ thread_id: string }>(`${url}/threads`, "POST", {});
  const threadId = thread.body.thread_id;
  // Over 256 KiB: the run's input and its final state are written beside it.
  const big = "large ".repeat(50_000);
  const run = await callJson<{ run_id: string }>(`${url}/threads/${threadId}/runs`, "POST", {
    assistant_id: "agent",
    input: { messages: [{ role: "user", content: big }] },
  });
  t.equal(run.status, 200, JSON.stringify(run.body));
  const runId = run.body.run_id;
  const joined = await callJson<{ messages: { content: string }[] }>(`${url}/threads/${threadId}/runs/${runId}/join`, "GET");
  t.equal(joined.body.messages[0].content, big, "the run saw the whole input");
  // Copies share nothing the purge removes: their values are written again beside them.
  const copyAfterRun = await callJson<{ thread_id: string; values: { messages: { content: string }[] } }>(`${url}/threads/${threadId}/copy`, "POST", {});
  t.equal(copyAfterRun.status, 200, JSON.stringify(copyAfterRun.body).slice(0, 300));
  t.equal(copyAfterRun.body.values?.messages?.[0]?.content, big, "the copy's answer holds the values, not a reference");
  const patched = await callJson<{ values: { messages: { content: string }[] } }>(`${url}/threads/${threadId}`, "PATCH", { metadata: { patched: true } });
  t.equal(patched.body.values?.messages?.[0]?.content, big, "a PATCH answers with the values, not a reference");
  // Interrupted before its node: the run answers its last values chunk, as the official servers do
  // ({"__interrupt__": []}), and the thread's state holds the large values read back.
  const paused = await callJson<{ run_id: string }>(`${url}/threads/${threadId}/runs`, "POST", {
    assistant_id: "agent",
    input: { messages: [{ role: "user", content: "pause" }] },
    interrupt_before: ["agent"],
  });
  t.equal(paused.status, 200, JSON.stringify(paused.body).slice(0, 300));
  const pausedRunId = paused.body.run_id;
  t.same((await callJson(`${url}/threads/${threadId}/runs/${pausedRunId}/join`, "GET")).body, { __interrupt__: [] });
  t.equal((await callJson<{ values: { messages: unknown[] } }>(`${url}/threads/${threadId}/state`, "GET")).body.values.messages.length, 3);
  const update = await callJson(`${url}/threads/${threadId}/state`, "POST", { values: { messages: [{ role: "user", content: `${big} again`, id: "again" }] } });
  t.equal(update.status, 200, JSON.stringify(update.body));
  t.equal((await callJson<{ values: { messages: unknown[] } }>(`${url}/threads/${threadId}/state`, "GET")).body.values.messages.length, 4);

  const copyAfterUpdate = await callJson<{ thread_id: string }>(`${url}/threads/${threadId}/copy`, "POST", {});
  t.equal(copyAfterUpdate.status, 200, JSON.stringify(copyAfterUpdate.body));

  const purge = await callJson(`${url}/threads/${threadId}?purge=true`, "DELETE");
  t.equal(purge.status, 204, JSON.stringify(purge.body));
  for (const [name, copy, count] of [
    ["the copy made after the run", copyAfterRun, 2],
    ["the copy made after the update", copyAfterUpdate, 4],
  ] as const) {
    const got = await callJson<{ values: { messages: { content: string }[] } }>(`${url}/threads/${copy.body.thread_id}`, "GET");
    t.equal(got.status, 200, `${name}: ${JSON.stringify(got.body).slice(0, 300)}`);
    t.equal(got.body.values?.messages?.length, count, `${name} keeps its values`);
    t.equal(got.body.values?.messages?.[0]?.content, big, `${name} keeps the large message`);
  }
  t.equal(await stopServer(proc), 0, "a clean stop");

  const file = path.join(dataDir, "events.sqlite");
  for (const [prefix, id] of [
    ["run-input-", runId],
    ["run-values-", pausedRunId],
    ["thread-values-", threadId],
  ] as const) {
    const streams = streamTypes(file, prefix, id);
    const types = Object.values(streams).flat();
    t.ok(types.length > 0, `${prefix}: the value was written beside (${JSON.stringify(streams)})`);
    t.same([...new Set(types)], ["EventPurged"], `${prefix}: every event of it is a tombstone`);
  }

  // The large checkpoint values (the messages, over 128 KiB) are in streams of their thread's own: the
  // purged thread's are tombstones, each copy wrote its own and keeps them, and none is shared.
  const db = new Database(file, { readonly: true });
  try {
    const typesOfValues = (id: string) =>
      db.prepare("SELECT DISTINCT type FROM events WHERE stream_id LIKE ? ORDER BY type").pluck().all(`checkpoint-value-${id}-%`) as string[];
    t.same(typesOfValues(threadId), ["EventPurged"], "the purged thread's checkpoint values are tombstones");
    for (const copy of [copyAfterRun, copyAfterUpdate]) t.same(typesOfValues(copy.body.thread_id), ["LargeJsonChunk"], "a copy's own values are intact");
    const ids = [threadId, copyAfterRun.body.thread_id, copyAfterUpdate.body.thread_id];
    const streams = db.prepare("SELECT DISTINCT stream_id FROM events WHERE stream_id LIKE 'checkpoint-value-%'").pluck().all() as string[];
    t.ok(streams.length >= 3, `checkpoint values were written apart (${streams.length} streams)`);
    t.same(
      streams.filter((s) => !ids.some((id) => s.startsWith(`checkpoint-value-${id}-`))),
      [],
      "every checkpoint value stream is one thread's",
    );
  } finally {
    db.close();
  }
});
