/**
 * The server's own counts of its durability and read-model work, read from `GET /metrics` before and after a phase
 * of a benchmark: how many WAL syncs and read-model fold transactions a job cost, and how long each took on average.
 */
import { request } from "undici";
import { round2 } from "./stats.js";

const TOTALS = {
  syncs: "agent_server_wal_syncs_total",
  syncSeconds: "agent_server_wal_sync_seconds_total",
  folds: "agent_server_projection_batches_total",
  foldSeconds: "agent_server_projection_batch_seconds_total",
} as const;

export type StoreTotals = Record<keyof typeof TOTALS, number>;

/** The value of each unlabelled sample `name` in a Prometheus text exposition (NaN when it is missing). */
export function sampleOf(text: string, name: string): number {
  const line = text.split("\n").find((l) => l.startsWith(`${name} `));
  return line === undefined ? NaN : Number(line.slice(name.length + 1));
}

export async function scrapeTotals(url: string): Promise<StoreTotals> {
  const res = await request(`${url}/metrics`);
  const text = await res.body.text();
  if (res.statusCode !== 200) throw new Error(`GET /metrics: HTTP ${res.statusCode}`);
  return Object.fromEntries(Object.entries(TOTALS).map(([key, name]) => [key, sampleOf(text, name)])) as StoreTotals;
}

export interface StoreWorkPerJob {
  /** WAL syncs per job, and their mean from start to report (null without syncs: synchronous NORMAL). */
  wal_syncs: number;
  wal_sync_mean_ms: number | null;
  /** Read-model fold transactions per job, and their mean duration. */
  fold_transactions: number;
  fold_mean_ms: number | null;
}

/** What `jobs` jobs cost between two scrapes. */
export function storeWorkPerJob(before: StoreTotals, after: StoreTotals, jobs: number): StoreWorkPerJob {
  const syncs = after.syncs - before.syncs;
  const folds = after.folds - before.folds;
  return {
    wal_syncs: round2(syncs / jobs),
    wal_sync_mean_ms: syncs > 0 ? round2(((after.syncSeconds - before.syncSeconds) / syncs) * 1000) : null,
    fold_transactions: round2(folds / jobs),
    fold_mean_ms: folds > 0 ? round2(((after.foldSeconds - before.foldSeconds) / folds) * 1000) : null,
  };
}
