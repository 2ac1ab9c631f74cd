#!/usr/bin/env node
// The whole test suite, as `npm test` runs it: typecheck, the tap suites under c8 coverage, every
// benchmark once in tiny mode (one test each: it must exit 0 and print its JSON), and the LangGraph
// checkpointer validation suite under vitest. Ends with one line "N passed, M failed, K skipped"
// (the README's form) and exits non-zero on any failure (or when no test ran at all).
import { spawn } from "node:child_process";
import { mkdirSync, readFileSync, rmSync } from "node:fs";
import path from "node:path";

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), "..");
const bin = (name) => path.join(root, "node_modules", ".bin", name);
const resultsDir = path.join(root, ".test-results");
rmSync(resultsDir, { recursive: true, force: true });
mkdirSync(resultsDir, { recursive: true });

/** Runs a command with inherited stdio, also capturing stdout when asked. */
function run(cmd, args, { capture = false } = {}) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd: root, stdio: ["ignore", capture ? "pipe" : "inherit", "inherit"], env: process.env });
    let out = "";
    if (capture) child.stdout.on("data", (chunk) => { out += chunk; process.stdout.write(chunk); });
    child.on("close", (code, signal) => resolve({ code: code ?? (signal ? 1 : 0), out }));
  });
}

/** Counts the tests of each file (subtests one level below the file) in raw TAP output. */
function countTap(tap) {
  let passed = 0, failed = 0, skipped = 0;
  const fileFailures = [];
  const subtestFailures = [];
  let pendingInner = [];
  let pendingDeep = [];
  const assertionFailures = [];
  let fileFailedInside = false;
  for (const line of tap.split("\n")) {
    // A failed assertion (or deeper subtest) inside a file's subtest: named in the tail too, so a CI log read from its end says why.
    const deep = /^ {8,}not ok \d+ - (.*)$/.exec(line);
    if (deep) {
      pendingDeep.push(deep[1]);
      continue;
    }
    const inner = /^    (not ok|ok) \d+ - .*?(# (SKIP|TODO)\b.*)?$/.exec(line);
    if (inner) {
      if (inner[2]) skipped++;
      else if (inner[1] === "ok") passed++;
      else { failed++; fileFailedInside = true; pendingInner.push(line.replace(/^    not ok \d+ - /, "")); }
      continue;
    }
    const file = /^(not ok|ok) \d+ - (.*?)(?: #.*)?$/.exec(line);
    if (file) {
      // A file that failed outside any subtest (crash, timeout, bad plan) still counts as a failure.
      if (file[1] === "not ok" && !fileFailedInside) { failed++; fileFailures.push(file[2]); }
      for (const name of pendingInner) subtestFailures.push(`${file[2]}: ${name}`);
      for (const name of pendingDeep) assertionFailures.push(`${file[2]}: ${name}`);
      pendingInner = [];
      pendingDeep = [];
      fileFailedInside = false;
    }
  }
  return { passed, failed, skipped, fileFailures, subtestFailures, assertionFailures };
}

/** Runs a command with stdout captured (not echoed), stderr inherited; kills its whole process group after timeoutMs. */
function capture(cmd, args, timeoutMs) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd: root, stdio: ["ignore", "pipe", "inherit"], env: process.env, detached: true });
    let out = "";
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      try { process.kill(-child.pid, "SIGKILL"); } catch { /* already gone */ }
    }, timeoutMs);
    child.stdout.on("data", (chunk) => { out += chunk; });
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
  const names = list.out.split("\n").map((l) => l.trim()).filter(Boolean);
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
const steps = [];

const typecheck = await run(bin("tsc"), ["-p", "tsconfig.json", "--noEmit"]);
steps.push(["typecheck", typecheck.code === 0]);
if (typecheck.code === 0) totals.passed++;
else totals.failed++;

// The browser pages (TSX, DOM types) have their own project: the README's useStream example is one of them.
const pages = await run(bin("tsc"), ["-p", "test/browser/tsconfig.json", "--noEmit"]);
steps.push(["typecheck browser pages", pages.code === 0]);
if (pages.code === 0) totals.passed++;
else totals.failed++;

const tap = await run(
  bin("c8"),
  ["--reporter=text-summary", "--reporter=lcov", "--report-dir=coverage", "--exclude=test/**", "--exclude=bench/**",
    bin("tap"), "--reporter=tap"],
  { capture: true },
);
const tapCounts = countTap(tap.out);
totals.passed += tapCounts.passed;
totals.failed += tapCounts.failed;
totals.skipped += tapCounts.skipped;
steps.push(["tap", tap.code === 0 && tapCounts.failed === 0]);
if (tap.code !== 0 && tapCounts.failed === 0) totals.failed++;

const benchCounts = await runBenches();
totals.passed += benchCounts.passed;
totals.failed += benchCounts.failed;
steps.push(["bench --tiny", benchCounts.failed === 0]);

const vitestReport = path.join(resultsDir, "vitest.json");
const vitest = await run(bin("vitest"), ["run", "--config", "test/vitest.config.ts", "--reporter=default", "--reporter=json", `--outputFile.json=${vitestReport}`]);
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
steps.push(["vitest", vitest.code === 0 && vitestCounts.failed === 0]);
if (vitest.code !== 0 && vitestCounts.failed === 0) totals.failed++;

for (const [name, ok] of steps) console.log(`${ok ? "ok" : "FAILED"}: ${name}`);
if (tapCounts.fileFailures.length) console.log(`failed test files: ${tapCounts.fileFailures.join(", ")}`);
// Named again here, next to the summary, because CI logs are often read from the tail only.
for (const name of tapCounts.subtestFailures) console.log(`failed: ${name}`);
for (const name of tapCounts.assertionFailures) console.log(`  failed assertion: ${name}`);
const ranNothing = totals.passed + totals.failed === 0;
console.log(`${totals.passed} passed, ${totals.failed} failed, ${totals.skipped} skipped`);
process.exit(totals.failed > 0 || ranNothing || steps.some(([, ok]) => !ok) ? 1 : 0);
