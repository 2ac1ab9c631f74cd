#!/usr/bin/env node
// The test suites. `npm test` (no argument) is the quick loop: typecheck, lint, the format check and the tap suites of the
// product, without the heavy files named in HEAVY. `npm run test:all` (--all, what .ci/run runs) is
// everything: typecheck, lint, the format check, every tap suite under c8 coverage, every benchmark once in tiny mode (one
// test each: it must exit 0 and print its JSON), and the LangGraph checkpointer validation suite
// under vitest. Both end with one line "N passed, M failed, K skipped" and exit non-zero on any
// failure (or when no test ran at all).
import { spawn } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { ALLOWED_SKIPS, countTap } from "./tap-counts.mjs";

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), "..");
const bin = (name) => path.join(root, "node_modules", ".bin", name);
const resultsDir = path.join(root, ".test-results");
const all = process.argv.includes("--all");

/**
 * The tap files only `--all` runs: a real browser (Chromium), the
 * chaos, fault and recovery runs (crashes, restarts and outages of the store or the server, a leader
 * that moves, processes killed in the middle of an Idempotency-Key's claim), the
 * official suite's parity check, the test of CI's own counting, and the files that start the product
 * as its users do, one process after another (the server's start and stop, `agent-server dev`, `serve`
 * and `replay`, a project folder with its own LangGraph), and those that run several server processes on one
 * EventStoreDB (runs, crons, webhooks, read models and Idempotency-Key shared between them): the slowest of the
 * rest. The benchmarks' harness has its
 * tests beside it (bench/test/, `npm run bench:test`: the statistics, the probes, valgrind's
 * instruction counts), run with the benchmarks' smoke runs below.
 */
const HEAVY = [
  /^test\/e2e\//,
  /^test\/eventstore\/esdb-(double-faults|any-idempotency|not-leader)\.test\.ts$/,
  /^test\/repo\/ci-counts\.test\.ts$/,
  /^test\/startup\/server-process\.test\.ts$/,
  /^test\/cli\/(serve|project-runtime|project-runtime-other-minor)\.test\.ts$/,
  /^test\/app\/replay-cli\.test\.ts$/,
  /^test\/app\/(runs|crons-webhooks|runs-idempotency)-esdb\.test\.ts$/,
  /^test\/read-models\/esdb\.test\.ts$/,
];
const testFiles = readdirSync(path.join(root, "test"), { recursive: true })
  .map((f) => `test/${String(f).split(path.sep).join("/")}`)
  .filter((f) => f.endsWith(".test.ts"))
  .sort();
const quickFiles = testFiles.filter((f) => !HEAVY.some((re) => re.test(f)));
rmSync(resultsDir, { recursive: true, force: true });
mkdirSync(resultsDir, { recursive: true });

/** Runs a command with inherited stdio, also capturing stdout when asked. */
function run(cmd, args, { capture = false } = {}) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd: root, stdio: ["ignore", capture ? "pipe" : "inherit", "inherit"], env: process.env });
    let out = "";
    if (capture)
      child.stdout.on("data", (chunk) => {
        out += chunk;
        process.stdout.write(chunk);
      });
    child.on("close", (code, signal) => resolve({ code: code ?? (signal ? 1 : 0), out }));
  });
}

/** Runs a command with stdout captured (not echoed), stderr inherited; kills its whole process group after timeoutMs. */
function capture(cmd, args, timeoutMs) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd: root, stdio: ["ignore", "pipe", "inherit"], env: process.env, detached: true });
    let out = "";
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch {
        /* already gone */
      }
    }, timeoutMs);
    child.stdout.on("data", (chunk) => {
      out += chunk;
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code: code ?? (signal ? 1 : 0), out, timedOut });
    });
  });
}

/**
 * Every benchmark `bench/run.ts --list` names, once with --tiny, so none can rot unnoticed. Each is
 * one test: it passes when it exits 0 and its stdout is the JSON object holding its result.
 */
async function runBenches() {
  const counts = { passed: 0, failed: 0 };
  const list = await capture(bin("tsx"), ["bench/run.ts", "--list"], 60_000);
  const names = list.out
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean);
  if (list.code !== 0 || names.length === 0) {
    console.log("not ok - bench --list: no benchmarks listed");
    counts.failed++;
    return counts;
  }
  for (const name of names) {
    const t0 = Date.now();
    const res = await capture(bin("tsx"), ["bench/run.ts", name, "--tiny"], 180_000);
    let problem = res.timedOut ? "timed out" : res.code !== 0 ? `exited with ${res.code}` : "";
    if (!problem) {
      try {
        const result = JSON.parse(res.out)[name];
        if (!result || typeof result !== "object") problem = `no "${name}" object in its JSON`;
      } catch {
        problem = "printed no JSON";
      }
    }
    const secs = ((Date.now() - t0) / 1000).toFixed(1);
    console.log(problem ? `not ok - bench ${name} --tiny: ${problem} (${secs}s)` : `ok - bench ${name} --tiny (${secs}s)`);
    if (problem) counts.failed++;
    else counts.passed++;
  }
  return counts;
}

const totals = { passed: 0, failed: 0, skipped: 0 };
/** [name, ok, seconds]: printed at the end with how long each step took, so a slow CI run shows where its time went. */
const steps = [];
const startedAt = Date.now();
let stepStartedAt = startedAt;
/** Seconds since the last step ended (or the start). */
function stepSeconds() {
  const now = Date.now();
  const seconds = Math.round((now - stepStartedAt) / 1000);
  stepStartedAt = now;
  return seconds;
}

/**
 * The static checks, all at once: each is one process with idle time to share, so together they take about the time
 * of the longest. Their caches (under node_modules/.cache, so a clean clone starts without them) make a second run
 * check only what changed: tsc's build info, eslint's and prettier's per-file results.
 */
const cacheDir = path.join(root, "node_modules", ".cache", "agent-server-checks");
mkdirSync(cacheDir, { recursive: true });
const staticChecks = [
  ["typecheck", bin("tsc"), ["-p", "tsconfig.json", "--noEmit", "--incremental", "--tsBuildInfoFile", path.join(cacheDir, "main.tsbuildinfo")]],
  ["lint", bin("eslint"), [".", "--cache", "--cache-location", path.join(cacheDir, "eslint")]],
  [
    "format (prettier --check; npm run format fixes it)",
    bin("prettier"),
    ["--check", "--log-level=warn", "--cache", "--cache-location", path.join(cacheDir, "prettier"), "."],
  ],
  // The browser pages (TSX, DOM types) have their own project: the README's useStream example is one of them.
  [
    "typecheck browser pages",
    bin("tsc"),
    ["-p", "test/browser/tsconfig.json", "--noEmit", "--incremental", "--tsBuildInfoFile", path.join(cacheDir, "browser.tsbuildinfo")],
  ],
];
const staticResults = await Promise.all(staticChecks.map(([, cmd, args]) => run(cmd, args)));
const staticSeconds = stepSeconds();
staticChecks.forEach(([name], i) => {
  const ok = staticResults[i].code === 0;
  steps.push([name, ok, staticSeconds]);
  if (ok) totals.passed++;
  else totals.failed++;
});

const tap = all
  ? await run(
      bin("c8"),
      ["--reporter=text-summary", "--reporter=lcov", "--report-dir=coverage", "--exclude=test/**", "--exclude=bench/**", bin("tap"), "--reporter=tap"],
      { capture: true },
    )
  : await run(bin("tap"), ["--reporter=tap", ...quickFiles], { capture: true });
const tapCounts = countTap(tap.out);
totals.passed += tapCounts.passed;
totals.failed += tapCounts.failed;
totals.skipped += tapCounts.skipped;
steps.push(["tap", tap.code === 0 && tapCounts.failed === 0, stepSeconds()]);
if (tap.code !== 0 && tapCounts.failed === 0) totals.failed++;

if (!all) {
  console.log(
    `quick suite: ${quickFiles.length} of ${testFiles.length} tap files; \`npm run test:all\` runs the other ${testFiles.length - quickFiles.length}, the benchmarks' smoke runs and the checkpointer validation suite`,
  );
  finish();
}

// The benchmarks' harness tests (bench/test/), counted with the rest.
const benchTests = await run(
  bin("tap"),
  [
    "--reporter=tap",
    ...readdirSync(path.join(root, "bench", "test"))
      .filter((f) => f.endsWith(".test.ts"))
      .map((f) => `bench/test/${f}`),
  ],
  {
    capture: true,
  },
);
const benchTestCounts = countTap(benchTests.out);
totals.passed += benchTestCounts.passed;
totals.failed += benchTestCounts.failed;
totals.skipped += benchTestCounts.skipped;
steps.push(["bench harness tests", benchTests.code === 0 && benchTestCounts.failed === 0, stepSeconds()]);
if (benchTests.code !== 0 && benchTestCounts.failed === 0) totals.failed++;

const benchCounts = await runBenches();
totals.passed += benchCounts.passed;
totals.failed += benchCounts.failed;
steps.push(["bench --tiny", benchCounts.failed === 0, stepSeconds()]);

const vitestReport = path.join(resultsDir, "vitest.json");
const vitest = await run(bin("vitest"), [
  "run",
  "--config",
  "test/vitest.config.ts",
  "--reporter=default",
  "--reporter=json",
  `--outputFile.json=${vitestReport}`,
]);
let vitestCounts = { passed: 0, failed: 0, skipped: 0 };
try {
  const report = JSON.parse(readFileSync(vitestReport, "utf8"));
  vitestCounts = { passed: report.numPassedTests, failed: report.numFailedTests, skipped: report.numPendingTests + (report.numTodoTests ?? 0) };
} catch {
  vitestCounts.failed = 1;
}
totals.passed += vitestCounts.passed;
totals.failed += vitestCounts.failed;
totals.skipped += vitestCounts.skipped;
steps.push(["vitest", vitest.code === 0 && vitestCounts.failed === 0, stepSeconds()]);
if (vitest.code !== 0 && vitestCounts.failed === 0) totals.failed++;

finish();

/** Prints the steps, the failures and the summary line, and exits. */
function finish() {
  // The static checks run at once: each shows their common time.
  for (const [name, ok, seconds] of steps) console.log(`${ok ? "ok" : "FAILED"}: ${name} (${seconds} s)`);
  console.log(`all steps: ${Math.round((Date.now() - startedAt) / 1000)} s`);
  if (tapCounts.fileFailures.length) console.log(`failed test files: ${tapCounts.fileFailures.join(", ")}`);
  // Named again here, next to the summary, because CI logs are often read from the tail only.
  for (const name of tapCounts.subtestFailures) console.log(`failed: ${name}`);
  for (const name of tapCounts.assertionFailures) console.log(`  failed assertion: ${name}`);
  for (const s of tapCounts.unexpectedSkips) console.log(`failed: skipped outside the allowlist: ${s.file}: ${s.name}`);
  for (const a of ALLOWED_SKIPS) console.log(`allowed skip: ${a.file}: ${a.name} (${a.why})`);
  const ranNothing = totals.passed + totals.failed === 0;
  console.log(`${totals.passed} passed, ${totals.failed} failed, ${totals.skipped} skipped`);
  process.exit(totals.failed > 0 || ranNothing || steps.some(([, ok]) => !ok) ? 1 : 0);
}
