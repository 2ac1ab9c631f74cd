/**
 * Instructions a command executes, counted by valgrind's callgrind: the same count for the same binary, inputs
 * and environment however busy the machine is (seen here: repeat counts of a server's start within 0.5 %, under load), where
 * its wall time drifts by up to 2× from hour to hour. So a start-up change of a few percent, invisible in
 * the spread of timed starts, can be judged by one count before and one after. Every thread of the process
 * is counted (callgrind runs them one at a time), about 30× slower than native. Node runs with V8's
 * `--predictable`: V8's background threads (concurrent compilation and garbage collection) then do their work on
 * the main thread, at fixed points. Without it how much of a loop runs before its optimised code is ready
 * depends on when callgrind switches threads, which depends on the machine's load: counts of one command drifted
 * by 2-4 % while other processes ran (660.4 and 632.9 M), with it they repeat within 0.01 % (a loop) and
 * 0.5 % (a server's start: a few million of its instructions vary from run to run, not yet traced).
 */
import { spawn, spawnSync } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { benchServerEnv, listeningUrlIn, repoRoot, startScriptNodeFlags } from "./server.js";

/** Where each script preloads the probe that exits the server as it prints its listening line. */
const EXIT_AT_LISTENING = path.join(repoRoot, "bench", "support", "exit-at-listening.cjs");

/** The total of a callgrind run's stderr ("==pid== Collected : N" or "==pid== I   refs:  1,234,567"), or undefined. */
export function parseCallgrindTotal(stderr: string): number | undefined {
  const m = /==\d+== (?:Collected :|I\s+refs:)\s+([\d,]+)/.exec(stderr);
  return m ? Number(m[1].replaceAll(",", "")) : undefined;
}

/** Why counting cannot run here (valgrind missing), or undefined when it can. */
export function instructionsUnavailable(): string | undefined {
  const probe = spawnSync("valgrind", ["--version"], { encoding: "utf8" });
  if (probe.error || probe.status !== 0) return "valgrind not found (Debian: apt-get install valgrind)";
  return undefined;
}

/** V8's predictable mode: all of V8's work on the main thread, so that a count does not depend on thread timing. */
const PREDICTABLE = "--predictable";

/**
 * Counts the instructions of `node --predictable <args>` to its exit. Rejects when the command fails or no total is printed.
 * Left out of its environment: NODE_OPTIONS and NODE_V8_COVERAGE (a test runner's loader hooks and coverage would be
 * counted as the command's own work), and NODE_EXTRA_CA_CERTS (this sandbox's CA bundle, parsed by every node
 * process before any JavaScript runs: 420 M of `node -e 0`'s 505 M instructions here, the same for any build).
 */
export function countNodeInstructions(args: readonly string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  return underCallgrind(args, env);
}

/**
 * Counts the instructions of a server's whole life under callgrind (`node --predictable`, npm start's flags, `script`):
 * from its start to its exit after SIGTERM, once `drive` (given the URL of its listening line) has resolved.
 */
export function serverLifeInstructions(script: string, env: NodeJS.ProcessEnv, drive: (url: string) => Promise<void>): Promise<number> {
  return underCallgrind([...startScriptNodeFlags(), script], env, drive);
}

/**
 * Runs `node --predictable <args>` under callgrind: a command runs to its exit; a server (with `drive`) is driven once
 * listening and then stopped (SIGTERM). Resolves with the total of instructions; rejects when it fails or prints none.
 */
function underCallgrind(args: readonly string[], env: NodeJS.ProcessEnv, drive?: (url: string) => Promise<void>): Promise<number> {
  // --smc-check: V8 writes and rewrites machine code on the heap; without it callgrind may run stale code.
  const valgrindArgs = ["--tool=callgrind", "--callgrind-out-file=/dev/null", "--smc-check=all-non-file", process.execPath, PREDICTABLE, ...args];
  return new Promise((resolve, reject) => {
    // Unset by env(1) in the child itself: a test runner that wraps spawn (tap's processinfo) puts its NODE_OPTIONS
    // back into whatever environment is passed here, and its coverage work made two counts of `node -e 0` 2.4 % apart.
    const unset = ["NODE_OPTIONS", "NODE_V8_COVERAGE", "NODE_EXTRA_CA_CERTS"].flatMap((name) => ["-u", name]);
    const child = spawn("env", [...unset, "valgrind", ...valgrindArgs], {
      cwd: repoRoot,
      env,
      stdio: ["ignore", drive ? "pipe" : "ignore", "pipe"],
    });
    let stderr = "";
    let failure: unknown;
    child.stderr!.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    if (drive) {
      let out = "";
      let driving = false;
      child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
        if (driving) return;
        out += chunk;
        const url = listeningUrlIn(out);
        if (!url) return;
        driving = true;
        drive(url).then(
          () => child.kill("SIGTERM"),
          (error: unknown) => {
            failure = error;
            child.kill("SIGTERM");
          },
        );
      });
    }
    child.on("error", reject);
    child.on("close", (code, signal) => {
      const total = parseCallgrindTotal(stderr);
      if (failure !== undefined) reject(failure);
      // A server stopped by SIGTERM may exit with any code: its count is still whole.
      else if ((code === 0 || drive) && total !== undefined) resolve(total);
      else reject(new Error(`callgrind of node ${args.join(" ")} ended ${code ?? signal} without a total: ${stderr.slice(-800)}`));
    });
  });
}

/**
 * Instructions from the start of `node <npm start's flags> <script>` on an empty data dir to its listening line
 * (the server then exits): the CPU work of a start, without the poll of /ok. `script`: a build's main.js.
 */
export async function startInstructions(script: string): Promise<number> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), "bench-start-insn-"));
  try {
    return await countNodeInstructions([...startScriptNodeFlags(), "--require", EXIT_AT_LISTENING, script], benchServerEnv(dataDir));
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
}

/** Instructions of `node -e 0`: the part of every start no server code can cut. */
export function nodeFloorInstructions(): Promise<number> {
  return countNodeInstructions(["-e", "0"]);
}
