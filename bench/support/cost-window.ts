/**
 * A server preloaded with bench/support/cost-probe.cjs (`COST_PROBE_ENV`, `costProbeNodeArgs`), and the windows its
 * counts are taken over: SIGUSR2 opens one, the next closes it, the probe answering on the server's stdout.
 */
import path from "node:path";
import { probeLines, repoRoot, type BenchServer } from "./server.js";

export const COST_PROBE = path.join(repoRoot, "bench", "support", "cost-probe.cjs");
/** The environment that makes the preloaded probe answer SIGUSR2. */
export const COST_PROBE_ENV = { COST_PROBE_SIGNALS: "1" } as const;
/** The node flags that preload the probe. */
export const costProbeNodeArgs = (): string[] => ["--require", COST_PROBE];

/** What the probe counts in a window. */
export interface ProbeCounts {
  promises: number;
  allocated_bytes: number;
  minor_gcs: number;
  major_gcs: number;
}

/** Opens a window of the server's probe; resolves, once it is open, with the function that closes it and gives its counts. */
export type OpenCountWindow = () => Promise<() => Promise<ProbeCounts>>;

export function costWindows(server: BenchServer): OpenCountWindow {
  const nextLine = probeLines(server, "cost-probe ");
  return async () => {
    server.child.kill("SIGUSR2");
    const started = await nextLine();
    if (started !== "started") throw new Error(`cost probe: expected "started", got ${started}`);
    return async () => {
      server.child.kill("SIGUSR2");
      return JSON.parse(await nextLine()) as ProbeCounts;
    };
  };
}
