// The counts of a raw TAP stream as .ci/test.mjs reports them: one test per subtest one level below
// a file; a file that fails outside its subtests, registers no test, or skips outside ALLOWED_SKIPS
// counts as a failure.
/** The only skips allowed: tests that need what a fresh machine does not have, with the reason. */
export const ALLOWED_SKIPS = [
  { file: "test/eventstore/esdb.test.ts", name: "contract: real EventStoreDB", why: "runs only with EVENTSTORE_URL naming a real EventStoreDB" },
];

/** Counts the tests of each file (subtests one level below the file) in raw TAP output. */
export function countTap(tap) {
  let passed = 0,
    failed = 0,
    skipped = 0;
  const fileFailures = [];
  const subtestFailures = [];
  let pendingInner = [];
  let pendingDeep = [];
  let pendingSkips = [];
  const skips = [];
  const assertionFailures = [];
  let fileFailedInside = false;
  for (const line of tap.split("\n")) {
    // A failed assertion (or deeper subtest) inside a file's subtest: named in the tail too, so a CI log read from its end says why.
    const deep = /^ {8,}not ok \d+ - (.*)$/.exec(line);
    if (deep) {
      pendingDeep.push(deep[1]);
      continue;
    }
    const inner = /^ {4}(not ok|ok) \d+ - (.*?)(?: # (SKIP|TODO)\b.*)?$/.exec(line);
    if (inner) {
      if (inner[3]) {
        skipped++;
        pendingSkips.push(inner[2]);
      } else if (inner[1] === "ok") passed++;
      else {
        failed++;
        fileFailedInside = true;
        pendingInner.push(line.replace(/^ {4}not ok \d+ - /, ""));
      }
      continue;
    }
    const file = /^(not ok|ok) \d+ - (.*?)(?: #.*)?$/.exec(line);
    if (file) {
      // A file that registers no test at all is reported by tap as a skip ("no tests found"): a failure here.
      if (/ # SKIP\b/.test(line)) {
        failed++;
        fileFailures.push(`${file[2]} (no test ran)`);
      }
      for (const name of pendingSkips) skips.push({ file: file[2], name });
      pendingSkips = [];
      // A file that failed outside any subtest (crash, timeout, bad plan) still counts as a failure.
      if (file[1] === "not ok" && !fileFailedInside) {
        failed++;
        fileFailures.push(file[2]);
      }
      for (const name of pendingInner) subtestFailures.push(`${file[2]}: ${name}`);
      for (const name of pendingDeep) assertionFailures.push(`${file[2]}: ${name}`);
      pendingInner = [];
      pendingDeep = [];
      fileFailedInside = false;
    }
  }
  // A skip outside the allowlist is a failure: a test that silently stops running would pass otherwise.
  const unexpectedSkips = skips.filter((s) => !ALLOWED_SKIPS.some((a) => a.file === s.file && a.name === s.name));
  failed += unexpectedSkips.length;
  return { passed, failed, skipped, fileFailures, subtestFailures, assertionFailures, unexpectedSkips };
}
