/**
 * The `agent-server` command as a user's project runs it: the package's own bin over a build made
 * with package.json's esbuild command (into a temporary package folder, so the repository's dist/
 * is left alone), started from a temporary project folder that holds its own langgraph.json,
 * graph file and node_modules.
 */
import { spawn, execFile, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { cpSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { repoRoot } from "./server.js";

const run = promisify(execFile);

export interface RepoPackageJson {
  name: string;
  version: string;
  scripts: Record<string, string>;
  dependencies: Record<string, string>;
  peerDependencies: Record<string, string>;
  bin: Record<string, string>;
  files: string[];
}

export const repoPackage = JSON.parse(readFileSync(path.join(repoRoot, "package.json"), "utf8")) as RepoPackageJson;

export function tempDir(prefix: string): string {
  return mkdtempSync(path.join(os.tmpdir(), `agent-server-${prefix}-`));
}

/**
 * A package folder as `npm pack` would ship it (package.json, README, bin/, the audit page, dist/
 * built by the "build" script's esbuild command) with node_modules linked to the repository's.
 * Returns its folder; the bin is `<folder>/<bin path>`.
 */
export async function buildPackage(): Promise<string> {
  const dir = tempDir("package");
  const build = repoPackage.scripts.build;
  // The script is "<remove dist> && esbuild ... --outdir=dist ...": its esbuild part, into this folder's dist.
  const esbuild = build.slice(build.indexOf("esbuild ")).replace("--outdir=dist", `--outdir=${JSON.stringify(path.join(dir, "dist"))}`);
  if (!esbuild.includes(path.join(dir, "dist"))) throw new Error(`the build script has no --outdir=dist: ${build}`);
  await run("sh", ["-c", `PATH="${path.join(repoRoot, "node_modules", ".bin")}:$PATH" ${esbuild}`], { cwd: repoRoot });
  cpSync(path.join(repoRoot, "package.json"), path.join(dir, "package.json"));
  cpSync(path.join(repoRoot, "README.md"), path.join(dir, "README.md"));
  cpSync(path.join(repoRoot, "bin"), path.join(dir, "bin"), { recursive: true });
  mkdirSync(path.join(dir, "src", "http"), { recursive: true });
  cpSync(path.join(repoRoot, "src", "http", "audit-page"), path.join(dir, "src", "http", "audit-page"), { recursive: true });
  // The dependencies an install would put beside it (and above the project's, where npm hoists them).
  symlinkSync(path.join(repoRoot, "node_modules"), path.join(dir, "node_modules"), "dir");
  return dir;
}

export function binOf(packageDir: string): string {
  return path.join(packageDir, repoPackage.bin["agent-server"]!);
}

export const GRAPH_TS = `import { Annotation, StateGraph, START, END } from "@langchain/langgraph";

const State = Annotation.Root({ text: Annotation<string> });

// GREETING comes from the .env file langgraph.json names.
export const graph = new StateGraph(State)
  .addNode("shout", (state: typeof State.State) => ({ text: \`\${process.env.GREETING ?? "(no GREETING)"} \${state.text.toUpperCase()}!\` }))
  .addEdge(START, "shout")
  .addEdge("shout", END)
  .compile();
`;

/**
 * A project folder: package.json, langgraph.json (graph `shouter`, env from `.env`), src/graph.ts,
 * and node_modules as `nodeModules` says: "link" = the repository's, or left out.
 */
export function makeProject(options: { nodeModules: "link" | "none" }): string {
  const dir = tempDir("project");
  writeFileSync(path.join(dir, "package.json"), JSON.stringify({ name: "my-agent", private: true, type: "module" }, null, 2));
  writeFileSync(path.join(dir, "langgraph.json"), JSON.stringify({ node_version: "20", graphs: { shouter: "./src/graph.ts:graph" }, env: ".env" }, null, 2));
  writeFileSync(path.join(dir, ".env"), "GREETING=hello from .env\n");
  mkdirSync(path.join(dir, "src"));
  writeFileSync(path.join(dir, "src", "graph.ts"), GRAPH_TS);
  if (options.nodeModules === "link") symlinkSync(path.join(repoRoot, "node_modules"), path.join(dir, "node_modules"), "dir");
  return dir;
}

/** Every path under `dir` with its size and mtime, node_modules and links not followed. */
export function snapshotTree(dir: string): string[] {
  const out: string[] = [];
  const walk = (sub: string) => {
    for (const name of readdirSync(path.join(dir, sub)).sort()) {
      const rel = path.join(sub, name);
      const stat = lstatSync(path.join(dir, rel));
      // The installed packages are the project's dependencies, not its sources.
      if (rel === "node_modules") out.push(rel);
      else if (stat.isSymbolicLink()) out.push(`${rel} -> link`);
      else if (stat.isDirectory()) {
        out.push(`${rel}/`);
        walk(rel);
      } else out.push(`${rel} ${stat.size} ${stat.mtimeMs}`);
    }
  };
  walk("");
  return out;
}

/** The server's environment without anything of this process that would choose for it. */
export function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, LOG_LEVEL: "silent" };
  for (const name of [
    "HOST",
    "PORT",
    "DATA_DIR",
    "EVENTSTORE_URL",
    "LANGGRAPH_JSON",
    "LANGGRAPH_CONFIG",
    "LANGGRAPH_DEV",
    "LANGGRAPH_WATCH",
    "LANGGRAPH_API_KEY",
    "GREETING",
  ])
    delete env[name];
  return { ...env, ...extra };
}

export interface CliProcess {
  child: ChildProcess;
  stdout: string;
  stderr: string;
  /** The URL of the start line, once printed. */
  url: string | undefined;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * Runs `node <bin> ...args` in `cwd` (as another user with `as`, when this process may); resolves once the ready line is printed (after the start line)
 * or the process ended, whichever is first.
 */
export async function startCli(
  bin: string,
  args: string[],
  cwd: string,
  env: NodeJS.ProcessEnv = cleanEnv(),
  as: { uid?: number; gid?: number } = {},
): Promise<CliProcess> {
  // The test runner adds its own hooks to every child's NODE_OPTIONS (they write into this repository);
  // a child running as another user starts through a shell that drops them.
  const [command, argv] =
    as.uid === undefined ? [process.execPath, [bin, ...args]] : ["/bin/sh", ["-c", 'unset NODE_OPTIONS; exec "$@"', "sh", process.execPath, bin, ...args]];
  const child = spawn(command, argv, { cwd, env, stdio: ["ignore", "pipe", "pipe"], ...as });
  const proc: CliProcess = {
    child,
    stdout: "",
    stderr: "",
    url: undefined,
    exited: once(child, "exit").then(([code, signal]) => ({ code: code as number | null, signal: signal as NodeJS.Signals | null })),
  };
  const ready = new Promise<void>((resolve) => {
    child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
      proc.stdout += chunk;
      proc.url ??= /listening on (http:\/\/\S+)/.exec(proc.stdout)?.[1];
      if (proc.url && /^agent-server ready/m.test(proc.stdout)) resolve();
    });
  });
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => (proc.stderr += chunk));
  await Promise.race([ready, proc.exited]);
  return proc;
}

/** Runs the command to its end. */
export async function runCli(
  bin: string,
  args: string[],
  cwd: string,
  env: NodeJS.ProcessEnv = cleanEnv(),
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const proc = await startCli(bin, args, cwd, env);
  const { code } = await proc.exited;
  return { code, stdout: proc.stdout, stderr: proc.stderr };
}

/** SIGTERM, then its exit code. */
export async function stopCli(proc: CliProcess): Promise<number | null> {
  if (proc.child.exitCode === null && proc.child.signalCode === null) proc.child.kill("SIGTERM");
  return (await proc.exited).code;
}

export function removeAll(...dirs: string[]): void {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
}
