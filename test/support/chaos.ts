/**
 * What the chaos tests (test/chaos-*.test.ts) check in the log after a fault: how often each run
 * was claimed, started and ended, which outputs it wrote, and what an SSE client saw of it.
 */
import type { Client } from "@langchain/langgraph-sdk";
import type { EventStore, RecordedEvent } from "../../src/eventstore/types.js";
import { runStream } from "../../src/domain/runs.js";
import { runSseId } from "../../src/http/sse.js";

/** One run as the log tells it. */
export interface RunLog {
  claims: number;
  /** `metadata` outputs: one per start of an execution. */
  starts: number;
  ends: number;
  status: string | undefined;
  /** The RunOutput events: `id event` per output, in order, with the SSE id of its revision (what an SSE client must see). */
  outputs: string[];
}

export async function runLog(store: EventStore, runId: string): Promise<RunLog> {
  const events = await store.readStream(runStream(runId));
  const outputs = events.filter((e) => e.type === "RunOutput");
  const ended = events.filter((e) => e.type === "RunEnded");
  return {
    claims: events.filter((e) => e.type === "RunClaimed").length,
    starts: outputs.filter((e) => (e.data as { event: string }).event === "metadata").length,
    ends: ended.length,
    status: (ended[0]?.data as { status?: string } | undefined)?.status,
    outputs: outputs.map(outputLine),
  };
}

const outputLine = (e: RecordedEvent) => `${runSseId(e.revision)} ${(e.data as { event: string }).event}`;

/** Reads a run's SSE stream from the start to its end through the SDK (which resumes with Last-Event-ID if a connection drops). */
export async function sseLines(client: Client, threadId: string, runId: string): Promise<string[]> {
  const lines: string[] = [];
  for await (const part of client.runs.joinStream(threadId, runId, { lastEventId: "-1" })) lines.push(`${part.id} ${part.event}`);
  return lines;
}

/** Resolves once every promise settled; the failures are reported, none is lost to an early rejection. */
export async function allSettled<T>(promises: Promise<T>[]): Promise<T[]> {
  const results = await Promise.allSettled(promises);
  const failed = results.filter((r): r is PromiseRejectedResult => r.status === "rejected");
  if (failed.length > 0)
    throw new Error(`${failed.length} of ${results.length} failed; first: ${(failed[0].reason as Error)?.stack ?? String(failed[0].reason)}`);
  return results.map((r) => (r as PromiseFulfilledResult<T>).value);
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
