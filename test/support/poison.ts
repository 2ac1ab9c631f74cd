/**
 * Poisoned logs: events written straight into the log, around the server's checks (as an older
 * version, a restore or a hand edit could have left them), for the quarantine tests.
 */
import path from "node:path";
import Database from "better-sqlite3";
import { v7 as uuidv7 } from "uuid";
import { openStore } from "../../src/eventstore/open.js";
import type { EventData, EventStore, RecordedEvent } from "../../src/eventstore/types.js";

/** `[[[…1…]]]`, `depth` arrays deep. */
export function deeplyNested(depth: number): unknown {
  let value: unknown = 1;
  for (let i = 0; i < depth; i++) value = [value];
  return value;
}

/** The log itself, without the server's schema checks: the SQLite file of a data dir (the server stopped), or EventStoreDB. */
export async function rawLog(where: { dataDir: string } | { eventstoreUrl: string }): Promise<EventStore> {
  return "dataDir" in where ? openStore({ dataDir: where.dataDir, eventstoreUrl: undefined }) : openStore({ dataDir: "", eventstoreUrl: where.eventstoreUrl });
}

/**
 * JSON text of `data` with the string `"<deep>"` (anywhere in it) replaced by an array nested `depth`
 * deep: text that JSON.parse reads back but JSON.stringify (and any recursive walk) cannot produce.
 */
export function withDeepValue(data: unknown, depth: number): string {
  const text = JSON.stringify(data);
  if (!text.includes('"<deep>"')) throw new Error('no "<deep>" in the data');
  return text.replace('"<deep>"', `${"[".repeat(depth)}1${"]".repeat(depth)}`);
}

/** A RunEnqueued like `model` (one the server wrote) for a new run of the same thread, its input nested `depth` deep. */
export function deepInputEnqueue(model: RecordedEvent, depth: number): { runId: string; event: EventData } {
  const { runId, data } = newRunLike(model, deeplyNested(depth));
  return { runId, event: { type: "RunEnqueued", data } };
}

/** The same as JSON text, for depths no JSON.stringify reaches (see withDeepValue). */
export function deepInputEnqueueText(model: RecordedEvent, depth: number): { runId: string; text: string } {
  const { runId, data } = newRunLike(model, "<deep>");
  return { runId, text: withDeepValue(data, depth) };
}

function newRunLike(model: RecordedEvent, input: unknown): { runId: string; data: unknown } {
  const data = structuredClone(model.data) as { run: { run_id: string; kwargs: Record<string, unknown> } };
  const runId = uuidv7();
  data.run.run_id = runId;
  data.run.kwargs = { ...data.run.kwargs, input };
  return { runId, data };
}

/** A thread with one run whose record has no kwargs (as a record of another version might): the folds cannot read it. */
export function threadWithRunWithoutKwargs(model: RecordedEvent): { threadId: string; runId: string; events: EventData[] } {
  const threadId = uuidv7();
  const runId = uuidv7();
  const run = { ...(model.data as { run: Record<string, unknown> }).run, run_id: runId, thread_id: threadId, kwargs: null };
  return {
    threadId,
    runId,
    events: [
      { type: "ThreadCreated", data: { thread_id: threadId, metadata: {}, created_at: new Date().toISOString() } },
      { type: "RunEnqueued", data: { run, thread_metadata: {} } },
    ],
  };
}

/** Replaces the stored data of the event at `position` in a data dir's SQLite log (the server stopped) with `text`, JSON or not. */
export function rewriteStoredData(dataDir: string, position: bigint, text: string): void {
  const db = new Database(path.join(dataDir, "events.sqlite"));
  try {
    const changed = db.prepare("UPDATE events SET data = ? WHERE position = ?").run(text, position).changes;
    if (changed !== 1) throw new Error(`no event at position ${position}`);
  } finally {
    db.close();
  }
}
