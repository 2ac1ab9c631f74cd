import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { Test } from "tap";
import { repoRoot } from "./server.js";

export interface ServerProcess {
  child: ChildProcess;
  /** Set once the server printed its listening line. */
  url: string | undefined;
  stdout: string;
  stderr: string;
  /** Resolves with the exit code (or signal) once the process ended. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * Starts `src/main.ts` (or another entry `script` that prints the same lines) as a child process (as
 * `npm start` does) and resolves once it printed its ready line (graphs loaded, run worker started:
 * after the listening line) or exited, whichever comes first. HOST defaults to 127.0.0.1 and PORT to 0.
 */
export async function spawnServer(env: Record<string, string>, script = "src/main.ts"): Promise<ServerProcess> {
  const child = spawn(process.execPath, ["--import", "tsx", script], {
    cwd: repoRoot,
    env: { ...process.env, HOST: "127.0.0.1", PORT: "0", LOG_LEVEL: "silent", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const proc: ServerProcess = {
    child,
    url: undefined,
    stdout: "",
    stderr: "",
    exited: once(child, "exit").then(([code, signal]) => ({ code: code as number | null, signal: signal as NodeJS.Signals | null })),
  };
  const listening = new Promise<void>((resolve) => {
    child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
      proc.stdout += chunk;
      const match = /listening on (http:\/\/\S+)/.exec(proc.stdout);
      if (match && !proc.url) proc.url = match[1];
      if (proc.url && /^agent-server ready/m.test(proc.stdout)) resolve();
    });
  });
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => (proc.stderr += chunk));
  await Promise.race([listening, proc.exited]);
  return proc;
}

/** SIGTERM unless it already exited; resolves with its exit code. */
export async function stopServer(proc: ServerProcess): Promise<number | null> {
  if (proc.child.exitCode !== null) return proc.child.exitCode;
  proc.child.kill("SIGTERM");
  return (await proc.exited).code;
}

/**
 * A server process of `t` with a DATA_DIR of its own (its own read models, e.g. beside others on one
 * EventStoreDB), checked to have started; at the end of `t` it is stopped, unless it already exited
 * (or was killed), and its data directory removed.
 */
export async function spawnServerOfTest(t: Test, env: Record<string, string>): Promise<ServerProcess> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), "agent-server-proc-"));
  const proc = await spawnServer({ ...env, DATA_DIR: dataDir });
  t.teardown(async () => {
    if (proc.child.exitCode === null && proc.child.signalCode === null) proc.child.kill("SIGTERM");
    await proc.exited;
    await rm(dataDir, { recursive: true, force: true });
  });
  t.ok(proc.url, `server started ${proc.stderr}`);
  return proc;
}
