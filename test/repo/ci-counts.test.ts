/**
 * The counts CI reports (.ci/tap-counts.mjs) over real tap output: files run by this repository's tap
 * in a temporary folder. A file that registers no test and a skip outside the allowlist are failures;
 * the allowed skip is counted as a skip.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import t, { type Test } from "tap";
import { ALLOWED_SKIPS, countTap } from "../../.ci/tap-counts.mjs";
import { repoRoot } from "../support/server.js";

const run = promisify(execFile);

/** Runs tap on `files` (name → source) in a fresh folder; its raw TAP output. */
async function tapOutput(t: Test, files: Record<string, string>): Promise<string> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "agent-server-ci-counts-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(path.join(dir, "package.json"), JSON.stringify({ type: "module", tap: { "disable-coverage": true } }));
  symlinkSync(path.join(repoRoot, "node_modules"), path.join(dir, "node_modules"), "dir");
  for (const [name, source] of Object.entries(files)) writeFileSync(path.join(dir, name), source);
  const result = await run(path.join(repoRoot, "node_modules", ".bin", "tap"), ["--reporter=tap", ...Object.keys(files)], { cwd: dir }).catch(
    (error: { stdout?: string }) => ({ stdout: error.stdout ?? "" }),
  );
  return result.stdout;
}

const passing = `import t from "tap";\nt.test("adds", async (t) => t.equal(1 + 1, 2));\n`;

t.test("passing subtests are counted, one per subtest", async (t) => {
  const counts = countTap(await tapOutput(t, { "a.test.mjs": passing, "b.test.mjs": passing }));
  t.match(counts, { passed: 2, failed: 0, skipped: 0, fileFailures: [], unexpectedSkips: [] });
});

t.test("a file that registers no test fails", async (t) => {
  const counts = countTap(await tapOutput(t, { "a.test.mjs": passing, "empty.test.mjs": `import t from "tap";\n` }));
  t.equal(counts.passed, 1);
  t.equal(counts.failed, 1);
  t.same(counts.fileFailures, ["empty.test.mjs (no test ran)"]);
});

t.test("a skip outside the allowlist fails; an allowed one is a skip", async (t) => {
  const allowed = ALLOWED_SKIPS[0]!;
  const counts = countTap(
    await tapOutput(t, {
      "skips.test.mjs": `import t from "tap";\nt.test("needs a thing", { skip: "no thing here" }, async () => {});\nt.test("runs", async (t) => t.ok(true));\n`,
    }),
  );
  t.match(counts, { passed: 1, skipped: 1, failed: 1 });
  t.same(counts.unexpectedSkips, [{ file: "skips.test.mjs", name: "needs a thing" }]);

  // The allowlisted skip, under its own file name.
  const dir = path.dirname(allowed.file);
  const file = path.basename(allowed.file).replace(/\.ts$/, ".mjs");
  const source = `import t from "tap";\nt.test(${JSON.stringify(allowed.name)}, { skip: "not here" }, async () => {});\nt.test("runs", async (t) => t.ok(true));\n`;
  const output = (await tapOutput(t, { [file]: source })).replaceAll(` - ${file}`, ` - ${dir}/${path.basename(allowed.file)}`);
  t.match(countTap(output), { passed: 1, skipped: 1, failed: 0, unexpectedSkips: [] });
});
