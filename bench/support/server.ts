/**
 * The server as a benchmark drives it: built and started as `npm start` does (`npm run build`, then
 * `node dist/main.js`), HOST=127.0.0.1 PORT=0, its own DATA_DIR. The child is the server process
 * itself (no npm wrapper), so its /proc entries are the server's memory and CPU.
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { request } from "undici";

export const repoRoot = path.dirname(path.dirname(path.dirname(fileURLToPath(import.meta.url))));

let built = false;

/** Bundles src/main.ts into dist/main.js once per benchmark process; build output goes to stderr so stdout stays JSON. */
export function buildServer(): void {
  if (built) return;
  execFileSync("npm", ["run", "build", "--silent"], { cwd: repoRoot, stdio: ["ignore", 2, 2] });
  built = true;
}

export interface BenchServer {
  child: ChildProcess;
  pid: number;
  url: string;
  /** Milliseconds from spawn to the listening line (history folded, read models caught up). */
  startMs: number;
  /** SIGTERM, then resolves once the process exited. */
  stop(): Promise<void>;
}

/** The node flags `npm start` gives the server (package.json's start script), so the benchmarks run what users run. */
export function startScriptNodeFlags(): string[] {
  const scripts = (JSON.parse(readFileSync(path.join(repoRoot, "package.json"), "utf8")) as { scripts: Record<string, string> }).scripts;
  const words = scripts.start.trim().split(/\s+/);
  if (words[0] !== "node" || words[words.length - 1] !== "dist/main.js") throw new Error(`npm start is not "node [flags] dist/main.js": ${scripts.start}`);
  return words.slice(1, -1);
}

/** A benchmark server's environment: this checkout's langgraph.json, no logs, `env`, then loopback on a free port and `dataDir`. */
/** The server's URL from what it printed so far: its listening line (src/cli/serve.ts), or undefined before it. */
export function listeningUrlIn(output: string): string | undefined {
  return /listening on (http:\/\/\S+)/.exec(output)?.[1];
}

export function benchServerEnv(dataDir: string, env: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    ...process.env,
    LANGGRAPH_JSON: path.join(repoRoot, "langgraph.json"),
    LOG_LEVEL: "silent",
    ...env,
    HOST: "127.0.0.1",
    PORT: "0",
    DATA_DIR: dataDir,
  };
}

/**
 * Starts the built server as `npm start` does (its node flags, then `nodeArgs`, e.g. --cpu-prof) and
 * resolves once it printed its listening line (rejects if it exits first). `script`: another build's
 * main.js instead of this checkout's dist/main.js (built here when it is the default).
 */
export async function startBenchServer(
  dataDir: string,
  env: Record<string, string> = {},
  nodeArgs: readonly string[] = [],
  script?: string,
): Promise<BenchServer> {
  if (!script) buildServer();
  const t0 = performance.now();
  const child = spawn(process.execPath, [...startScriptNodeFlags(), ...nodeArgs, script ?? "dist/main.js"], {
    cwd: repoRoot,
    env: benchServerEnv(dataDir, env),
    stdio: ["ignore", "pipe", "inherit"],
  });
  const exited = once(child, "exit");
  const url = await new Promise<string>((resolve, reject) => {
    let out = "";
    child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
      out += chunk;
      const listening = listeningUrlIn(out);
      if (listening) resolve(listening);
    });
    void exited.then(([code, signal]) => reject(new Error(`server exited (${code ?? signal}) before listening`)));
  });
  const startMs = performance.now() - t0;
  child.stdout!.resume(); // keep draining its log lines
  return {
    child,
    pid: child.pid!,
    url,
    startMs,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      await exited;
    },
  };
}

/**
 * The lines a preloaded probe prints on the server's stdout after `prefix` (prefix stripped), one at a
 * time, in order: each call resolves with the next one.
 */
export function probeLines(server: BenchServer, prefix: string): () => Promise<string> {
  const lines: string[] = [];
  const waiting: ((line: string) => void)[] = [];
  let partial = "";
  server.child.stdout!.on("data", (chunk: string) => {
    const parts = (partial + chunk).split("\n");
    partial = parts.pop()!;
    for (const line of parts) {
      if (!line.startsWith(prefix)) continue;
      const body = line.slice(prefix.length);
      const take = waiting.shift();
      if (take) take(body);
      else lines.push(body);
    }
  });
  return () => (lines.length ? Promise.resolve(lines.shift()!) : new Promise((resolve) => waiting.push(resolve)));
}

/** GET /ok until it answers 200; resolves with the milliseconds that took. */
export async function waitOk(url: string, timeoutMs = 30_000): Promise<number> {
  const t0 = performance.now();
  for (;;) {
    try {
      const res = await request(`${url}/ok`);
      await res.body.dump();
      if (res.statusCode === 200) return performance.now() - t0;
    } catch {
      // not accepting connections yet
    }
    if (performance.now() - t0 > timeoutMs) throw new Error(`${url}/ok did not answer 200 within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** Resident set size of a process, MiB (VmRSS of /proc/<pid>/status). */
export async function rssMiB(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN);
  return Math.round((kb / 1024) * 10) / 10;
}

/**
 * RSS now, and once the process has been left idle: V8 keeps the young generation and the garbage
 * of a burst until its memory reducer runs (about 15 s into idleness), so RSS read right after
 * start-up or a load is mostly not-yet-returned heap. Samples every 500 ms for up to `maxMs`,
 * stopping early once RSS fell at least 10 % below the first sample and held for a sample.
 */
export async function rssNowAndSettled(pid: number, maxMs: number): Promise<{ now_mib: number; settled_mib: number; settled_after_ms: number }> {
  const first = await rssMiB(pid);
  let last = first;
  let dropped = false;
  const t0 = performance.now();
  while (performance.now() - t0 < maxMs) {
    await new Promise((r) => setTimeout(r, 500));
    const rss = await rssMiB(pid);
    if (dropped && rss <= last * 1.02) {
      last = Math.min(last, rss);
      break;
    }
    dropped = rss < first * 0.9;
    last = rss;
  }
  return { now_mib: first, settled_mib: last, settled_after_ms: Math.round(performance.now() - t0) };
}

let clockTicks: number | undefined;

/** CPU time a process has used so far (user + system), milliseconds, from /proc/<pid>/stat. */
export async function cpuMs(pid: number): Promise<number> {
  clockTicks ??= Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
  const stat = await readFile(`/proc/${pid}/stat`, "utf8");
  // Fields after the parenthesised command name: state is field 3, utime 14, stime 15.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return ((Number(fields[11]) + Number(fields[12])) / clockTicks) * 1000;
}
