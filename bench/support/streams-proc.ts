/**
 * A server's process tree as Linux's /proc shows it: the process and its descendants (the official dev server
 * is a CLI process that spawns the server; this one is a single process), their CPU time summed (utime + stime,
 * as `cpuMs`) and their resident memory summed (VmRSS, as `rssMiB`), and the peak of that sum sampled
 * during a phase. CPU of a descendant that exited during the phase is not counted (neither server spawns any).
 */
import { readdir, readFile } from "node:fs/promises";
import { cpuMs, rssMiB } from "./server.js";

/** `pid` and every descendant (from /proc/<pid>/task/<tid>/children); processes that vanish are skipped. */
export async function processTree(pid: number): Promise<number[]> {
  const seen: number[] = [];
  const queue = [pid];
  while (queue.length) {
    const p = queue.shift()!;
    if (seen.includes(p)) continue;
    let tasks: string[];
    try {
      tasks = await readdir(`/proc/${p}/task`);
    } catch {
      continue; // gone
    }
    seen.push(p);
    for (const task of tasks) {
      try {
        const children = (await readFile(`/proc/${p}/task/${task}/children`, "utf8")).trim();
        if (children) queue.push(...children.split(/\s+/).map(Number));
      } catch {
        // the thread ended
      }
    }
  }
  return seen;
}

async function sumOver(pids: readonly number[], read: (pid: number) => Promise<number>): Promise<number> {
  let total = 0;
  for (const p of pids) {
    try {
      total += await read(p);
    } catch {
      // the process ended between the listing and the read
    }
  }
  return total;
}

/** CPU time (user + system) of the tree so far, ms. */
export async function treeCpuMs(pid: number): Promise<number> {
  return sumOver(await processTree(pid), cpuMs);
}

/** Resident memory of the tree now, MiB. */
export async function treeRssMiB(pid: number): Promise<number> {
  return sumOver(await processTree(pid), rssMiB);
}

/** Samples the tree's RSS every `everyMs` until stopped; `stop()` resolves with the highest sum seen (MiB). */
export function sampleTreePeakRss(pid: number, everyMs = 100): { stop(): Promise<number> } {
  let peak = 0;
  let running = true;
  const loop = (async () => {
    while (running) {
      peak = Math.max(peak, await treeRssMiB(pid));
      await new Promise((r) => setTimeout(r, everyMs));
    }
    peak = Math.max(peak, await treeRssMiB(pid));
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return Math.round(peak * 10) / 10;
    },
  };
}
