import { channel } from "node:diagnostics_channel";

/**
 * Named points on a run's way through the server (the request, the claim, the graph, the log's commit and
 * sync, the answer), published on a diagnostics channel only while something subscribes to it: the
 * `critical-path` benchmark's probe, which times a sequential `runs/wait` point by point. Without a
 * subscriber a point costs one property read.
 */
export const CRITICAL_PATH_CHANNEL = "agent-server:critical-path";

const points = channel(CRITICAL_PATH_CHANNEL);

export function tracePoint(name: string): void {
  if (points.hasSubscribers) points.publish(name);
}
