/** Size switches every benchmark understands. */
export interface BenchOptions {
  /** A few seconds' worth of work: `npm test` runs every benchmark this way to prove it still completes. */
  tiny: boolean;
  /** The largest size a benchmark offers (scale: 1,000,000 threads). */
  big: boolean;
}

/** `--tiny` / `--big` on the command line, or BENCH_TINY=1 / BENCH_BIG=1 in the environment. */
export function parseBenchOptions(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): BenchOptions {
  const on = (v: string | undefined) => !!v && v !== "0" && v !== "false";
  return {
    tiny: argv.includes("--tiny") || on(env.BENCH_TINY),
    big: argv.includes("--big") || on(env.BENCH_BIG),
  };
}

/** A positive integer from the environment (unset or empty: the fallback); anything else is an error naming the variable. */
export function positiveIntEnv(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const v = env[name];
  if (v === undefined || v === "") return fallback;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must be a positive integer, got "${v}"`);
  return n;
}
