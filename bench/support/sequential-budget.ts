import { round2 } from "./stats.js";

/** One point of a median timeline: its name (a k-th occurrence in one wait is `name#k`) and its median ms. */
export interface TimelineRow {
  point: string;
  median_ms: number;
  n: number;
}

/** The median ms of `point` in the timeline, if it has that point. */
export function medianAt(timeline: TimelineRow[], point: string): number | undefined {
  return timeline.find((r) => r.point === point)?.median_ms;
}

/**
 * The sequential target (client p50 ≤ 1.5 × the engine's invoke + 1 ms) taken apart: the time a wait spends
 * outside its graph, what the target leaves for it, and the parts of it no server code runs in: the wait for
 * the disk after the run's end is written (its last commit to its last WAL sync, both before the result) and
 * the client with the loopback (the client's p50 beyond the server's request-to-finish). The rest is the
 * server's own work around the graph. Null where the timeline lacks a point.
 */
export function sequentialBudget(timeline: TimelineRow[], clientP50Ms: number, engineInvokeMs: number | null): Record<string, number | null> | null {
  const at = (point: string) => medianAt(timeline, point);
  const graphStart = at("graph.start");
  const graphEnd = at("graph.end");
  const result = at("wait.result");
  const finish = at("response.finish");
  if (engineInvokeMs === null || graphStart === undefined || graphEnd === undefined || result === undefined || finish === undefined) return null;
  const lastBefore = (name: string, limit: number) =>
    Math.max(...timeline.filter((r) => (r.point === name || r.point.startsWith(`${name}#`)) && r.median_ms <= limit).map((r) => r.median_ms));
  const lastSync = lastBefore("log.sync.end", result);
  const lastCommit = lastBefore("log.commit.end", lastSync);
  const target = 1.5 * engineInvokeMs + 1;
  const outside = clientP50Ms - (graphEnd - graphStart);
  const disk = Number.isFinite(lastSync) && Number.isFinite(lastCommit) ? lastSync - lastCommit : null;
  const client = clientP50Ms - finish;
  const r = (ms: number | null) => (ms === null ? null : round2(ms));
  return {
    target_p50_ms: r(target),
    p50_over_target: r(clientP50Ms / target),
    outside_graph_ms: r(outside),
    outside_graph_budget_ms: r(target - (graphEnd - graphStart)),
    disk_sync_after_end_ms: r(disk),
    client_and_loopback_ms: r(client),
    server_work_outside_graph_ms: r(disk === null ? null : outside - disk - client),
  };
}
