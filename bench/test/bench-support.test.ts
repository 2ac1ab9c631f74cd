import t from "tap";
import { execFile } from "node:child_process";
import { closeSync, mkdtempSync, openSync, rmSync, writeSync } from "node:fs";
import { readdir } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { createRequire } from "node:module";
import { promisify } from "node:util";
import { repoRoot } from "../../test/support/server.js";
import { parseBenchOptions } from "../support/options.js";
import { cpuMs, rssMiB } from "../support/server.js";
import { check, findEventsPerSecond, median, mediansOf, pairedRatios, percentile, perSecond, summary, tally } from "../support/stats.js";
import { sampleOf, storeWorkPerJob } from "../support/metrics.js";
import { sequentialBudget } from "../support/sequential-budget.js";
import { ioPerJob, parseProcIo, readProcIo } from "../support/proc-io.js";
import { parseCallgrindTotal } from "../support/instructions.js";

/** The benchmark helpers: options, statistics and target checks (pure), and the /proc readers. */

t.test("parseBenchOptions: flags or environment", async (t) => {
  t.same(parseBenchOptions([], {}), { tiny: false, big: false });
  t.same(parseBenchOptions(["scale", "--tiny"], {}), { tiny: true, big: false });
  t.same(parseBenchOptions(["--big"], {}), { tiny: false, big: true });
  t.same(parseBenchOptions([], { BENCH_TINY: "1" }), { tiny: true, big: false });
  t.same(parseBenchOptions([], { BENCH_TINY: "0", BENCH_BIG: "false" }), { tiny: false, big: false });
});

t.test("percentile and summary of latencies", async (t) => {
  const ms = Array.from({ length: 100 }, (_, i) => 100 - i); // 100 … 1, unsorted
  t.equal(
    percentile(
      [...ms].sort((a, b) => a - b),
      50,
    ),
    51,
  );
  t.same(summary(ms), { n: 100, p50_ms: 51, p99_ms: 100, mean_ms: 50.5 });
  t.same(summary([3.14159]), { n: 1, p50_ms: 3.14, p99_ms: 3.14, mean_ms: 3.14 });
  t.throws(() => percentile([], 50), /no samples/);
  t.equal(perSecond(500, 250), 2000);
});

t.test("median: the middle value, the mean of the middle two for an even count, none of nothing", async (t) => {
  t.equal(median([3, 1, 2]), 2);
  t.equal(median([4, 1, 3, 2]), 2.5);
  t.equal(median([7]), 7);
  t.throws(() => median([]), /median of no samples/);
});

t.test("check: upper and lower bounds, unmeasured values", async (t) => {
  t.same(check(120, { max: 150, unit: "MiB" }), { value: 120, target: "≤ 150 MiB", pass: true });
  t.same(check(151, { max: 150, unit: "MiB" }), { value: 151, target: "≤ 150 MiB", pass: false });
  t.same(check(3999, { min: 4000, unit: "threads/s" }), { value: 3999, target: "≥ 4000 threads/s", pass: false });
  t.same(check(null, { min: 50_000, unit: "events/s" }), { value: null, target: "≥ 50000 events/s", pass: null });
  t.same(check(Number.NaN, { max: 1, unit: "ms" }).pass, null);
  t.same(tally({ a: check(1, { max: 2, unit: "" }), b: check(3, { max: 2, unit: "" }), c: check(null, { max: 2, unit: "" }) }), {
    passed: 1,
    failed: 1,
    not_measured: 1,
  });
});

t.test("findEventsPerSecond: the rebuild script's number, wherever it sits", async (t) => {
  t.equal(findEventsPerSecond({ events: 10, events_per_s: 81234 }), 81234);
  t.equal(findEventsPerSecond({ rebuild: { eventsPerSecond: 5 } }), 5);
  t.equal(findEventsPerSecond({ "events/s": 7 }), 7);
  t.equal(findEventsPerSecond({ events: 10, ms: 3 }), null);
  t.equal(findEventsPerSecond("not json"), null);
});

t.test("store work per job from two /metrics scrapes: unlabelled samples, means, no division by zero", async (t) => {
  const text = [
    "# HELP agent_server_wal_syncs_total x",
    "# TYPE agent_server_wal_syncs_total counter",
    "agent_server_wal_syncs_total 12",
    'agent_server_runs{status="success"} 3',
    "agent_server_wal_syncs_total_extra 9",
    "",
  ].join("\n");
  t.equal(sampleOf(text, "agent_server_wal_syncs_total"), 12);
  t.ok(Number.isNaN(sampleOf(text, "agent_server_projection_batches_total")), "a missing sample is NaN");
  const before = { syncs: 10, syncSeconds: 0.01, folds: 4, foldSeconds: 0.002 };
  const after = { syncs: 30, syncSeconds: 0.03, folds: 14, foldSeconds: 0.004 };
  t.same(storeWorkPerJob(before, after, 10), { wal_syncs: 2, wal_sync_mean_ms: 1, fold_transactions: 1, fold_mean_ms: 0.2 });
  t.same(
    storeWorkPerJob(before, { ...before }, 10),
    { wal_syncs: 0, wal_sync_mean_ms: null, fold_transactions: 0, fold_mean_ms: null },
    "no syncs (synchronous NORMAL): no mean",
  );
});

t.test("I/O calls per job from two /proc/<pid>/io readings", async (t) => {
  const text = "rchar: 2048\nwchar: 10240\nsyscr: 7\nsyscw: 40\nread_bytes: 0\nwrite_bytes: 4096\ncancelled_write_bytes: 0\n";
  const before = parseProcIo(text)!;
  t.same(before, { syscr: 7, syscw: 40, rchar: 2048, wchar: 10240 });
  t.equal(parseProcIo("rchar: 1\nwchar: 2\n"), undefined, "a reading without the call counts is none");
  const after = { syscr: 17, syscw: 100, rchar: 2048 + 10 * 1024, wchar: 10240 + 5 * 1024 };
  t.same(ioPerJob(before, after, 10), { read_calls: 1, write_calls: 6, read_kb: 1, written_kb: 0.5 });
  t.equal(ioPerJob(undefined, after, 10), null, "no reading (not Linux): null, not zeros");
  t.equal(ioPerJob(before, after, 0), null);
});

t.test("readProcIo counts this process's own writes to a file", { skip: process.platform !== "linux" && "Linux only" }, async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "proc-io-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const before = await readProcIo(process.pid);
  t.ok(before, "readable");
  const fd = openSync(path.join(dir, "f"), "w");
  for (let i = 0; i < 50; i++) writeSync(fd, Buffer.alloc(1024, 1));
  closeSync(fd);
  const after = await readProcIo(process.pid);
  t.ok(after!.syscw - before!.syscw >= 50, `${after!.syscw - before!.syscw} write calls for 50 writes`);
  t.ok(after!.wchar - before!.wchar >= 50 * 1024, "their bytes");
  t.equal(await readProcIo(2 ** 30), undefined, "no such process: undefined");
});

t.test("rssMiB and cpuMs read this process's /proc entries", async (t) => {
  const rss = await rssMiB(process.pid);
  t.ok(rss > 10 && rss < 4096, `RSS ${rss} MiB`);
  const before = await cpuMs(process.pid);
  const until = Date.now() + 50;
  while (Date.now() < until); // burn CPU so utime must grow
  const after = await cpuMs(process.pid);
  t.ok(after > before, `CPU ${before} → ${after} ms`);
  const own = process.cpuUsage();
  t.ok(Math.abs(after - (own.user + own.system) / 1000) < 200, "agrees with process.cpuUsage()");
});

t.test("bench/run.ts --list names every benchmark file, so CI runs each one in tiny mode", async (t) => {
  const files = (await readdir(path.join(repoRoot, "bench"), { withFileTypes: true }))
    .filter((f) => f.isFile() && f.name.endsWith(".ts") && f.name !== "run.ts")
    .map((f) => f.name.slice(0, -3))
    .sort();
  t.ok(files.length >= 7, `benchmark files found: ${files.join(", ")}`);
  const { stdout } = await promisify(execFile)(path.join(repoRoot, "node_modules", ".bin", "tsx"), ["bench/run.ts", "--list"], { cwd: repoRoot });
  t.same(stdout.split("\n").filter(Boolean).sort(), files, "one name per file under bench/ (bench/support/ holds helpers)");
});

t.test("the cost probe counts the promises and heap bytes of its window, and its GCs", async (t) => {
  const probe = createRequire(import.meta.url)("../support/cost-probe.cjs") as {
    open(): void;
    close(): { promises: number; allocated_bytes: number; minor_gcs: number; major_gcs: number };
  };
  t.throws(() => probe.close(), /no window/);
  probe.open();
  t.throws(() => probe.open(), /open already/);
  const made = Array.from({ length: 1000 }, (_, i) => Promise.resolve(i)); // nothing else runs meanwhile
  const counts = probe.close();
  t.equal(counts.promises, made.length, "each promise made inside the window, and only those");
  probe.open();
  let kept: { i: number; tag: string }[] = [];
  for (let i = 0; i < 1_000_000; i++) kept.push({ i, tag: `n${i}` }); // ~50 MB of young objects, most surviving a while
  kept = kept.slice(-10);
  const heavy = probe.close();
  t.ok(heavy.allocated_bytes > 32 * 1024 * 1024, `allocated ${heavy.allocated_bytes} bytes`);
  t.ok(heavy.minor_gcs >= 1, `${heavy.minor_gcs} scavenges`);
  t.equal(kept.length, 10);
  t.equal(heavy.promises, 0, "no promise made in the second window");
});

t.test("trace points reach a subscriber of the critical-path channel, and nothing is published without one", async (t) => {
  const { subscribe, unsubscribe, channel } = await import("node:diagnostics_channel");
  const { tracePoint, CRITICAL_PATH_CHANNEL } = await import("../../src/util/trace-points.js");
  const seen: unknown[] = [];
  const listener = (message: unknown) => seen.push(message);
  t.notOk(channel(CRITICAL_PATH_CHANNEL).hasSubscribers, "nobody listens at first");
  tracePoint("before");
  subscribe(CRITICAL_PATH_CHANNEL, listener);
  tracePoint("graph.start");
  tracePoint("graph.end");
  unsubscribe(CRITICAL_PATH_CHANNEL, listener);
  tracePoint("after");
  t.same(seen, ["graph.start", "graph.end"]);
});

t.test("the critical-path probe's timeline: the median of each point over the records, a name's k-th occurrence its own point", async (t) => {
  const probe = createRequire(import.meta.url)("../support/critical-path-probe.cjs") as {
    medianTimeline(records: [string, number][][]): { point: string; median_ms: number; n: number }[];
    CHANNEL: string;
  };
  const { CRITICAL_PATH_CHANNEL } = await import("../../src/util/trace-points.js");
  t.equal(probe.CHANNEL, CRITICAL_PATH_CHANNEL, "the probe listens where the server's trace points are published");
  const timeline = probe.medianTimeline([
    [
      ["request", 0],
      ["log.commit.start", 1],
      ["graph.start", 2],
      ["log.commit.start", 5],
      ["response.finish", 9],
    ],
    [
      ["request", 0],
      ["log.commit.start", 3],
      ["graph.start", 4],
      ["log.commit.start", 7],
      ["response.finish", 11],
    ],
    [
      ["request", 0],
      ["graph.start", 3.5],
      ["log.commit.start", 6],
      ["response.finish", 10],
    ],
  ]);
  t.same(timeline, [
    { point: "request", median_ms: 0, n: 3 },
    { point: "log.commit.start", median_ms: 3, n: 3 }, // first occurrences 1, 3, 6
    { point: "graph.start", median_ms: 3.5, n: 3 },
    { point: "log.commit.start#2", median_ms: 6, n: 2 }, // second ones 5, 7: the mean of the middle two
    { point: "response.finish", median_ms: 10, n: 3 },
  ]);
  t.same(probe.medianTimeline([]), []);
});

t.test("the sequential budget: the time outside the graph, what the target leaves for it, the disk's and the client's parts", async (t) => {
  const row = (point: string, median_ms: number) => ({ point, median_ms, n: 10 });
  const timeline = [
    row("request", 0),
    row("log.commit.end", 1),
    row("graph.start", 1.5),
    row("log.sync.end", 2), // the enqueue's sync, during the graph
    row("graph.end", 5.5),
    row("log.commit.end#2", 6),
    row("log.sync.end#2", 7),
    row("wait.result", 7.25),
    row("response.finish", 7.5),
    row("log.sync.end#3", 8), // after the answer: not the answer's
  ];
  t.same(sequentialBudget(timeline, 8.5, 4), {
    target_p50_ms: 7, // 1.5 × 4 + 1
    p50_over_target: 1.21,
    outside_graph_ms: 4.5, // 8.5 − (5.5 − 1.5)
    outside_graph_budget_ms: 3, // 7 − 4
    disk_sync_after_end_ms: 1, // the last commit (6) to the last sync before the result (7)
    client_and_loopback_ms: 1, // 8.5 − 7.5
    server_work_outside_graph_ms: 2.5,
  });
  t.equal(sequentialBudget(timeline, 8.5, null), null, "no engine time, no target");
  t.equal(
    sequentialBudget(
      timeline.filter((r) => r.point !== "wait.result"),
      8.5,
      4,
    ),
    null,
    "a missing point",
  );
  const noSync = sequentialBudget(
    timeline.filter((r) => !r.point.startsWith("log.sync")),
    8.5,
    4,
  );
  t.equal(noSync?.disk_sync_after_end_ms, null, "without WAL syncs (synchronous NORMAL) the disk's part is unknown");
  t.equal(noSync?.server_work_outside_graph_ms, null);
});

t.test("parseCallgrindTotal: the total callgrind prints at the end, in either form", async (t) => {
  t.equal(parseCallgrindTotal("==10601== Events    : Ir\n==10601== Collected : 1723858766\n"), 1723858766);
  t.equal(parseCallgrindTotal("==10601== \n==10601== I   refs:      1,723,858,766\n"), 1723858766);
  t.equal(parseCallgrindTotal("node: bad option\n"), undefined, "no total: undefined");
});

t.test("mediansOf and pairedRatios: each metric's median, and the ratios b/a round by round", async (t) => {
  const a = [
    { x: 2, y: 10 },
    { x: 4, y: 10 },
    { x: 3, y: 20 },
  ];
  const b = [
    { x: 3, y: 5 },
    { x: 4, y: 10 },
    { x: 6, y: 10 },
  ];
  t.same(mediansOf(a, ["x", "y"]), { x: 3, y: 10 });
  t.same(pairedRatios(a, b, ["x", "y"]), {
    x: { median: 1.5, min: 1, max: 2, rounds: [1.5, 1, 2] },
    y: { median: 0.5, min: 0.5, max: 1, rounds: [0.5, 1, 0.5] },
  });
});
