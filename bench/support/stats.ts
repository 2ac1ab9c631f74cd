/** Pure helpers for benchmark numbers: percentiles, rates and target checks. */

export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) throw new Error("percentile of no samples");
  return round2(sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]);
}

/** The middle value (the mean of the two middle ones for an even count). */
export function median(values: readonly number[]): number {
  if (values.length === 0) throw new Error("median of no samples");
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

export interface LatencySummary {
  n: number;
  p50_ms: number;
  p99_ms: number;
  mean_ms: number;
}

export function summary(ms: readonly number[]): LatencySummary {
  const s = [...ms].sort((a, b) => a - b);
  return { n: s.length, p50_ms: percentile(s, 50), p99_ms: percentile(s, 99), mean_ms: round2(s.reduce((a, b) => a + b, 0) / s.length) };
}

/** Operations per second, rounded. */
export function perSecond(count: number, ms: number): number {
  return Math.round((count / ms) * 1000);
}

export function round2(n: number): number {
  return Math.round(n * 100) / 100;
}

/** Each metric's median over samples, rounded. */
export function mediansOf<M extends string>(samples: readonly Record<M, number>[], metrics: readonly M[]): Record<M, number> {
  return Object.fromEntries(metrics.map((m) => [m, round2(median(samples.map((s) => s[m])))])) as Record<M, number>;
}

export interface PairedRatio {
  median: number;
  min: number;
  max: number;
  rounds: number[];
}

/** Per-round values: their median, min and max, and each round's, rounded. */
export function spreadOf(values: readonly number[]): PairedRatio {
  return { median: round2(median(values)), min: round2(Math.min(...values)), max: round2(Math.max(...values)), rounds: values.map(round2) };
}

/** Per metric, the ratios b/a of paired rounds (round i of each side): median, min, max and each round's. */
export function pairedRatios<M extends string>(
  a: readonly Record<M, number>[],
  b: readonly Record<M, number>[],
  metrics: readonly M[],
): Record<M, PairedRatio> {
  return Object.fromEntries(metrics.map((m) => [m, spreadOf(a.map((sample, i) => b[i]![m] / sample[m]))])) as Record<M, PairedRatio>;
}

export interface Target {
  /** The measure must be at most this… */
  max?: number;
  /** …or at least this. */
  min?: number;
  unit: string;
}

export interface Checked {
  value: number | null;
  target: string;
  /** null when the measure could not be taken (e.g. no rebuild script). */
  pass: boolean | null;
}

export function check(value: number | null, target: Target): Checked {
  const bounds = [target.max !== undefined ? `≤ ${target.max}` : "", target.min !== undefined ? `≥ ${target.min}` : ""].filter(Boolean);
  const text = `${bounds.join(" and ")} ${target.unit}`.trim();
  if (value === null || !Number.isFinite(value)) return { value: null, target: text, pass: null };
  const pass = (target.max === undefined || value <= target.max) && (target.min === undefined || value >= target.min);
  return { value, target: text, pass };
}

/** How many checks passed, failed, or could not be measured. */
export function tally(checks: Record<string, Checked>): { passed: number; failed: number; not_measured: number } {
  const all = Object.values(checks);
  return {
    passed: all.filter((c) => c.pass === true).length,
    failed: all.filter((c) => c.pass === false).length,
    not_measured: all.filter((c) => c.pass === null).length,
  };
}

/**
 * The events/s a rebuild reported: the first number whose key reads like "events per second"
 * (events_per_s, eventsPerSecond, events/s …), searched depth-first; null if there is none.
 */
export function findEventsPerSecond(output: unknown): number | null {
  if (!output || typeof output !== "object") return null;
  for (const [key, value] of Object.entries(output)) {
    if (typeof value === "number" && /events.*(per|\/).*s/i.test(key)) return value;
    const inner = findEventsPerSecond(value);
    if (inner !== null) return inner;
  }
  return null;
}
