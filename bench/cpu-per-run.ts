/**
 * Server CPU per run: the built server (dist/main.js, SQLite synchronous=FULL, the example graph `agent`)
 * as a child process, `runs.wait` on a new thread per run at concurrency 16, and the server's CPU time
 * (utime + stime from /proc/<pid>/stat) read before and after the runs. Threads are created before the
 * measured window, so only the runs count.
 * Run: npx tsx bench/cpu-per-run.ts [runs]
 *   CPU_PROF_DIR=dir   adds `node --cpu-prof` to the server (wall-clock samples: fsync waits show as CPU)
 *   PERF_DATA=file     records on-CPU samples of the measured window with `perf record -e cpu-clock`
 *                      (server started with --perf-basic-prof, so JS functions have names; V8 then leaves
 *                      isolate-*-v8.log files in the repository root: delete them)
 *   NODE_ARGS="..."    more node flags for the server; SERVER_STDOUT=file keeps what it prints
 */
import { execFileSync, spawn } from "node:child_process";
import { createWriteStream } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Agent, request } from "undici";
import { cpuMs, listeningUrlIn, startScriptNodeFlags } from "./support/server.js";

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const CONCURRENCY = 16;

export async function benchCpuPerRun(runs = 2_000, warmupRuns = 500): Promise<Record<string, unknown>> {
  // The build's messages go to stderr: stdout carries only the JSON result.
  execFileSync("npm", ["run", "build", "--silent"], { cwd: root, stdio: ["ignore", 2, "inherit"] });
  const dataDir = await mkdtemp(path.join(os.tmpdir(), "agent-server-bench-cpu-"));
  const profDir = process.env.CPU_PROF_DIR;
  const perfData = process.env.PERF_DATA;
  const nodeArgs = [
    ...(process.env.NODE_ARGS?.split(" ").filter(Boolean) ?? []),
    ...(profDir ? ["--cpu-prof", `--cpu-prof-dir=${path.resolve(profDir)}`] : []),
    ...(perfData ? ["--perf-basic-prof"] : []),
  ];
  const child = spawn(process.execPath, [...startScriptNodeFlags(), ...nodeArgs, "dist/main.js"], {
    cwd: root,
    env: {
      ...process.env,
      HOST: "127.0.0.1",
      PORT: "0",
      DATA_DIR: dataDir,
      LANGGRAPH_JSON: path.join(root, "langgraph.json"),
      LOG_LEVEL: "silent",
      N_JOBS_PER_WORKER: "64",
    },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const exited = new Promise((r) => child.once("exit", r));
  const dispatcher = new Agent({ connections: 64, pipelining: 1, keepAliveTimeout: 30_000 });
  try {
    const url = await new Promise<string>((resolve, reject) => {
      let out = "";
      const log = process.env.SERVER_STDOUT ? createWriteStream(process.env.SERVER_STDOUT) : undefined;
      child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
        log?.write(chunk);
        if (out.length > 100_000) return;
        out += chunk;
        const listening = listeningUrlIn(out);
        if (listening) resolve(listening);
      });
      child.once("exit", (code) => reject(new Error(`server exited with ${code}`)));
    });
    const post = async (p: string, body: unknown) => {
      const res = await request(`${url}${p}`, { method: "POST", dispatcher, headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
      const text = await res.body.text();
      if (res.statusCode !== 200) throw new Error(`${p}: HTTP ${res.statusCode} ${text}`);
      return text;
    };
    const newThread = async () => (JSON.parse(await post("/threads", {})) as { thread_id: string }).thread_id;
    const input = { messages: [{ role: "user", content: "hello" }] };
    const wait = async (threadId: string) => {
      const text = await post(`/threads/${threadId}/runs/wait`, { assistant_id: "agent", input });
      if (!text.includes("You said: hello")) throw new Error(`unexpected result ${text}`);
    };
    const pool = async (n: number, job: (i: number) => Promise<void>) => {
      let next = 0;
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          while (next < n) await job(next++);
        }),
      );
    };
    const warm = await Promise.all(Array.from({ length: warmupRuns }, () => newThread()));
    await pool(warm.length, (i) => wait(warm[i])); // JIT, graph, SQLite pages
    const threads = await Promise.all(Array.from({ length: runs }, () => newThread()));
    const perf = perfData
      ? spawn("perf", ["record", "-q", "-e", "cpu-clock", "-F", "997", "-g", "-p", String(child.pid), "-o", path.resolve(perfData)], { stdio: "inherit" })
      : undefined;
    const cpu0 = await cpuMs(child.pid!);
    const t0 = performance.now();
    await pool(runs, (i) => wait(threads[i]));
    const seconds = (performance.now() - t0) / 1000;
    const cpu = (await cpuMs(child.pid!)) - cpu0;
    if (perf) {
      perf.kill("SIGINT");
      await new Promise((r) => perf.once("exit", r));
    }
    return {
      runs,
      warmup_runs: warmupRuns,
      concurrency: CONCURRENCY,
      server_cpu_ms_per_run: +(cpu / runs).toFixed(3),
      server_cpu_s: +(cpu / 1000).toFixed(2),
      runs_per_s: Math.round(runs / seconds),
      target_ms_per_run: 3,
    };
  } finally {
    child.kill("SIGTERM");
    await exited;
    await dispatcher.close();
    await rm(dataDir, { recursive: true, force: true });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  console.log(JSON.stringify(await benchCpuPerRun(Number(process.argv[2] ?? 2_000)), null, 2));
}
