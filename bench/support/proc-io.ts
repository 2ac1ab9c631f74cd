/**
 * A process's I/O system calls from Linux's `/proc/<pid>/io`, read before and after a phase of a benchmark:
 * counts that do not drift with the machine's speed. They take in sockets as well as files (an HTTP
 * request read, a response written), so they compare builds of the same server under the same load, and
 * say nothing alone about the disk. SQLite writes each WAL frame with two `pwrite` calls (its header, then
 * its page), so a change that dirties fewer B-tree pages per commit shows here as fewer write calls per job.
 */
import { readFile } from "node:fs/promises";
import { round2 } from "./stats.js";

export interface IoTotals {
  /** read and write system calls (read, pread, readv…; write, pwrite, writev…). */
  syscr: number;
  syscw: number;
  /** Bytes those calls asked for (files and sockets; from the page cache or not). */
  rchar: number;
  wchar: number;
}

/** Parses the `key: value` lines of `/proc/<pid>/io`; undefined when one of the four counts is missing. */
export function parseProcIo(text: string): IoTotals | undefined {
  const values = new Map<string, number>();
  for (const line of text.split("\n")) {
    const m = /^(\w+):\s*(\d+)$/.exec(line.trim());
    if (m) values.set(m[1], Number(m[2]));
  }
  const totals = { syscr: values.get("syscr"), syscw: values.get("syscw"), rchar: values.get("rchar"), wchar: values.get("wchar") };
  return Object.values(totals).every((v) => v !== undefined) ? (totals as IoTotals) : undefined;
}

/** The process's totals now; undefined where there is no `/proc/<pid>/io` (not Linux, or not readable). */
export async function readProcIo(pid: number): Promise<IoTotals | undefined> {
  try {
    return parseProcIo(await readFile(`/proc/${pid}/io`, "utf8"));
  } catch {
    return undefined;
  }
}

export interface IoPerJob {
  read_calls: number;
  write_calls: number;
  read_kb: number;
  written_kb: number;
}

/** What `jobs` jobs cost between two readings (null when either reading is missing). */
export function ioPerJob(before: IoTotals | undefined, after: IoTotals | undefined, jobs: number): IoPerJob | null {
  if (!before || !after || jobs <= 0) return null;
  return {
    read_calls: round2((after.syscr - before.syscr) / jobs),
    write_calls: round2((after.syscw - before.syscw) / jobs),
    read_kb: round2((after.rchar - before.rchar) / 1024 / jobs),
    written_kb: round2((after.wchar - before.wchar) / 1024 / jobs),
  };
}
