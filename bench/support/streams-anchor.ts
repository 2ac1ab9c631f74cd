/**
 * The anchor of the `streams` benchmark: the official JS dev server (`@langchain/langgraph-cli dev`, its
 * in-memory `@langchain/langgraph-api`) on the same graph source. The packages come from STREAMS_ANCHOR_DIR
 * (a folder whose node_modules holds both) or are installed from the registry, once, into a scratch folder
 * under the temp dir (kept for later runs), with the same @langchain/langgraph, @langchain/core and
 * @langchain/langgraph-checkpoint versions as this repository's node_modules. The graph file is written into
 * a folder inside that one, so it resolves the anchor's copies. The CLI is run with node directly (no npx);
 * it spawns the server process, so CPU and RSS are taken over the process tree (bench/support/streams-proc.ts).
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { request } from "undici";
import { repoRoot } from "./server.js";
import { streamsGraphSource, streamsLanggraphJson } from "./streams-graph.js";

export const ANCHOR_VERSION = "1.5.1";
const CLI = path.join("node_modules", "@langchain", "langgraph-cli", "dist", "cli", "cli.mjs");
const SHARED = ["@langchain/langgraph", "@langchain/core", "@langchain/langgraph-checkpoint"];

async function versionIn(dir: string, pkg: string): Promise<string | undefined> {
  try {
    return (JSON.parse(await readFile(path.join(dir, "node_modules", pkg, "package.json"), "utf8")) as { version: string }).version;
  } catch {
    return undefined;
  }
}

/**
 * The folder holding the official CLI and API: STREAMS_ANCHOR_DIR, or the scratch folder (installed there with
 * `npm install` if it does not hold version ANCHOR_VERSION yet). Throws with npm's output when that fails.
 */
export async function anchorDir(env: NodeJS.ProcessEnv = process.env): Promise<string> {
  if (env.STREAMS_ANCHOR_DIR) {
    const dir = path.resolve(env.STREAMS_ANCHOR_DIR);
    if (!existsSync(path.join(dir, CLI))) throw new Error(`STREAMS_ANCHOR_DIR=${dir} holds no ${CLI}`);
    return dir;
  }
  const dir = path.join(tmpdir(), `agent-server-bench-streams-anchor-${ANCHOR_VERSION}`);
  if ((await versionIn(dir, "@langchain/langgraph-cli")) === ANCHOR_VERSION && (await versionIn(dir, "@langchain/langgraph-api")) === ANCHOR_VERSION)
    return dir;
  await mkdir(dir, { recursive: true });
  await writeFile(path.join(dir, "package.json"), JSON.stringify({ name: "streams-anchor", private: true, type: "module" }, null, 2));
  const pinned: string[] = [];
  for (const pkg of SHARED) {
    const v = await versionIn(repoRoot, pkg);
    pinned.push(v ? `${pkg}@${v}` : pkg);
  }
  const specs = [`@langchain/langgraph-cli@${ANCHOR_VERSION}`, `@langchain/langgraph-api@${ANCHOR_VERSION}`, ...pinned];
  console.error(`streams: installing the anchor into ${dir}: npm install ${specs.join(" ")}`);
  try {
    await promisify(execFile)("npm", ["install", "--no-audit", "--no-fund", "--loglevel=error", ...specs], {
      cwd: dir,
      timeout: 600_000,
      maxBuffer: 16 * 1024 * 1024,
    });
  } catch (error) {
    const e = error as { stderr?: string; message: string };
    throw new Error(`npm install ${specs.join(" ")} failed: ${(e.stderr || e.message).trim().slice(-1500)}`);
  }
  if (!existsSync(path.join(dir, CLI))) throw new Error(`npm install left no ${CLI} in ${dir}`);
  return dir;
}

/** A free TCP port on 127.0.0.1 (bound, then released). */
export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as { port: number };
  server.close();
  await once(server, "close");
  return port;
}

export interface AnchorServer {
  /** The CLI process (the root of the tree). */
  pid: number;
  url: string;
  describe: string;
  stop(): Promise<void>;
}

/** GET /ok until it answers 200; throws once `exited()` names an exit code or after `timeoutMs`. */
async function waitReady(url: string, timeoutMs: number, exited: () => string | undefined): Promise<void> {
  const t0 = performance.now();
  for (;;) {
    const code = exited();
    if (code !== undefined) throw new Error(`exited (${code}) before answering /ok`);
    try {
      const res = await request(`${url}/ok`);
      await res.body.dump();
      if (res.statusCode === 200) return;
    } catch {
      // not accepting connections yet
    }
    if (performance.now() - t0 > timeoutMs) throw new Error(`${url}/ok did not answer 200 within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Starts `langgraph-cli dev` from `dir` on the streams graph; resolves once GET /ok answers 200. */
export async function startAnchor(dir: string, tokens: number, sleepMs: number, maxJobs: number): Promise<AnchorServer> {
  const project = await mkdtemp(path.join(dir, "project-"));
  await mkdir(path.join(project, "src"));
  await writeFile(path.join(project, "src", "chat.ts"), streamsGraphSource(tokens, sleepMs));
  await writeFile(path.join(project, "langgraph.json"), streamsLanggraphJson("./src/chat.ts"));
  const port = await freePort();
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    N_JOBS_PER_WORKER: String(maxJobs),
    LANGGRAPH_CLI_NO_ANALYTICS: "1",
    LANGSMITH_TRACING: "false",
    LANGCHAIN_TRACING_V2: "false",
  };
  delete env.NODE_OPTIONS;
  const args = [
    path.join(dir, CLI),
    "dev",
    "--host",
    "127.0.0.1",
    "--port",
    String(port),
    "--no-browser",
    "--no-reload",
    "--n-jobs-per-worker",
    String(maxJobs),
    "--config",
    path.join(project, "langgraph.json"),
  ];
  // Its own process group, so the server it spawns is stopped with it.
  const child: ChildProcess = spawn(process.execPath, args, { cwd: project, env, stdio: ["ignore", "pipe", "pipe"], detached: true });
  let tail = "";
  const keep = (chunk: Buffer) => {
    tail = (tail + chunk.toString()).slice(-4000);
  };
  child.stdout!.on("data", keep);
  child.stderr!.on("data", keep);
  const exited = once(child, "exit");
  const url = `http://127.0.0.1:${port}`;
  const killGroup = (signal: NodeJS.Signals) => {
    try {
      process.kill(-child.pid!, signal);
    } catch {
      // the group is gone
    }
  };
  const stop = async () => {
    killGroup("SIGTERM");
    const timer = setTimeout(() => killGroup("SIGKILL"), 5_000);
    if (child.exitCode === null && child.signalCode === null) await exited;
    // The server it spawned may outlive the CLI by a moment.
    await new Promise((r) => setTimeout(r, 200));
    killGroup("SIGKILL");
    clearTimeout(timer);
    await rm(project, { recursive: true, force: true });
  };
  let exitedAt: string | undefined;
  void exited.then(([code, signal]) => (exitedAt = String(code ?? signal)));
  try {
    await waitReady(url, 180_000, () => exitedAt);
  } catch (error) {
    await stop();
    throw new Error(`the official dev server did not start: ${(error as Error).message}\n${tail.trim()}`);
  }
  const version = await versionIn(dir, "@langchain/langgraph");
  return {
    pid: child.pid!,
    url,
    describe: `@langchain/langgraph-cli@${ANCHOR_VERSION} dev (@langchain/langgraph-api@${(await versionIn(dir, "@langchain/langgraph-api")) ?? "?"}, in-memory, @langchain/langgraph@${version ?? "?"}), --n-jobs-per-worker ${maxJobs}, process tree`,
    stop,
  };
}
