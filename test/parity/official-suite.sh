#!/usr/bin/env bash
# Runs the official LangGraph.js server's own API and auth test suites (langchain-ai/langgraphjs,
# libs/langgraph-api/tests/{api,auth}.test.mts) against THIS server. Their files are copied from a
# langgraphjs checkout into a temporary folder at run time; none of them is kept in this repository.
# Then it compares the tests that failed with the expected failures listed in test/parity/README.md
# (its ```expected-failures block): see that README for what is expected to fail and why.
#
#   test/parity/official-suite.sh [--any-commit] [LANGGRAPHJS] [REF]
#   test/parity/official-suite.sh --compare DIR
#
#   LANGGRAPHJS   a clone of https://github.com/langchain-ai/langgraphjs (work tree or git dir); it
#                 must hold PINNED_COMMIT (its work tree is not used: the files come from `git archive`).
#                 Without it the repository is cloned into the temporary folder (needs network).
#   REF           the commit to take the tests from (default PINNED_COMMIT). Another commit is refused,
#                 since the expected failures were checked against PINNED_COMMIT only...
#   --any-commit  ...unless this is given (or env ANY_COMMIT=1): then it runs, with a warning.
#   --compare DIR only the comparison, offline: DIR holds a vitest JSON report <suite>.json (and
#                 optionally vitest's exit code in <suite>.exit) for each suite of SUITES.
#   env SUITES    which suites (default "api auth"); API_PORT / AUTH_PORT (default 2024 / 2025, the
#                 ports the suites were written for; their generative-UI test expects 2024)
#   env KEEP=1    keeps the temporary folder (server logs, data, the vitest reports) for a look afterwards
#
# Exit status: 0 when the tests that failed are exactly the expected ones, or some of them (the others
# are named as now passing); 1 when any other test failed (each is named), or a server did not start;
# 2 on a usage error, a clone without the commit, or another commit without --any-commit.
set -euo pipefail

# The langgraphjs commit the expected failures in test/parity/README.md were checked against
# (2026-08-21, "fix(sdk): drop unused svelte and vue peer dependencies (#2727)"). Change it only
# together with that list, after running the suites of the new commit.
PINNED_COMMIT=f8bdf16d4fe23a79e945ea5dc6f86bbf09abb77d

REPO=$(cd "$(dirname "$0")/../.." && pwd)
README=$REPO/test/parity/README.md
SUITES=${SUITES:-api auth}
API_PORT=${API_PORT:-2024}
AUTH_PORT=${AUTH_PORT:-2025}
ANY_COMMIT=${ANY_COMMIT:-}

usage() {
  echo "usage: $0 [--any-commit] [LANGGRAPHJS] [REF]" >&2
  echo "       $0 --compare DIR    (see the comment at the top of $0)" >&2
  exit 2
}

for suite in $SUITES; do
  case $suite in
    api | auth) ;;
    *) echo "unknown suite $suite (SUITES takes api and auth)" >&2; exit 2 ;;
  esac
done

# Compares the failures in the vitest JSON reports DIR/<suite>.json with README's expected-failures
# block (the lines of the suites run), prints new failures and expected ones that did not fail.
compare() { # DIR
  API_PORT=$API_PORT PINNED_COMMIT=$PINNED_COMMIT node --input-type=module - "$README" "$1" $SUITES <<'JS'
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";

const [readme, dir, ...suites] = process.argv.slice(2);
const block = /^```expected-failures[ \t]*\n([\s\S]*?)^```/m.exec(readFileSync(readme, "utf8"));
if (!block) {
  console.error(`no \`\`\`expected-failures block in ${readme}`);
  process.exit(2);
}
const expected = new Set();
for (const raw of block[1].split("\n")) {
  const line = raw.trim();
  if (!line || line.startsWith("#")) continue;
  const m = /^(\w+): (\S.*)$/.exec(line);
  if (!m) {
    console.error(`${readme}: not "suite: test name" in the expected-failures block: ${line}`);
    process.exit(2);
  }
  if (suites.includes(m[1])) expected.add(`${m[1]}: ${m[2]}`);
}
// Its expected HTML names http://localhost:2024: on another port it fails too (README).
if (suites.includes("api") && process.env.API_PORT !== "2024") expected.add("api: generative ui");

const firstLine = (s) => String(s ?? "").trim().split("\n")[0].slice(0, 200);
const failed = new Set();
const status = new Map();
for (const suite of suites) {
  const report = path.join(dir, `${suite}.json`);
  const exitFile = path.join(dir, `${suite}.exit`);
  const exit = existsSync(exitFile) ? Number(readFileSync(exitFile, "utf8").trim()) : 0;
  if (!existsSync(report)) {
    failed.add(`${suite}: (no results: vitest wrote no report${exit ? `, exited ${exit}` : ""})`);
    continue;
  }
  let failedHere = 0;
  for (const file of JSON.parse(readFileSync(report, "utf8")).testResults ?? []) {
    let failedInFile = 0;
    for (const a of file.assertionResults ?? []) {
      const name = `${suite}: ${[...(a.ancestorTitles ?? []), a.title].join(" > ")}`;
      status.set(name, a.status);
      if (a.status === "failed") {
        failed.add(name);
        failedInFile++;
      }
    }
    // A file that did not load, or failed outside its tests (a hook): named by its error.
    if (file.status === "failed" && !failedInFile) {
      failed.add(`${suite}: (${path.basename(file.name ?? "")} failed outside its tests: ${firstLine(file.message) || "no message"})`);
      failedInFile++;
    }
    failedHere += failedInFile;
  }
  if (exit && !failedHere) failed.add(`${suite}: (vitest exited ${exit} with no failing test: an error outside the tests, see its output)`);
}

const unexpected = [...failed].filter((n) => !expected.has(n));
const fixed = [...expected].filter((n) => !failed.has(n));
console.log(`\n== failures compared with the expected ones (${path.relative(process.cwd(), readme) || readme}, langgraphjs ${process.env.PINNED_COMMIT.slice(0, 8)})`);
console.log(`${failed.size} failed, ${failed.size - unexpected.length} of them expected (${expected.size} expected for: ${suites.join(" ")})`);
if (fixed.length) {
  console.log(`\nexpected to fail but did not (remove them from the README's list once understood):`);
  for (const n of fixed) console.log(`  ${n}  [${status.get(n) ?? "not run: no test of that name"}]`);
}
if (unexpected.length) {
  console.log(`\nNEW failures (not in the README's expected-failures block):`);
  for (const n of unexpected) console.log(`  ${n}`);
  process.exit(1);
}
console.log(fixed.length ? "\nOK: only expected failures (a subset of them)" : "\nOK: exactly the expected failures");
JS
}

if [ "${1:-}" = --compare ]; then
  [ $# -eq 2 ] && [ -d "$2" ] || usage
  status=0
  compare "$2" || status=$?
  exit $status
fi

ARGS=()
for arg in "$@"; do
  case $arg in
    --any-commit) ANY_COMMIT=1 ;;
    -h | --help) usage ;;
    -*) echo "unknown option $arg" >&2; usage ;;
    *) ARGS+=("$arg") ;;
  esac
done
[ ${#ARGS[@]} -le 2 ] || usage
SOURCE=${ARGS[0]:-}
REF=${ARGS[1]:-$PINNED_COMMIT}

WORK=$(mktemp -d "${TMPDIR:-/tmp}/official-suite-XXXXXX")
PIDS=()

cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  if [ "${KEEP:-}" = 1 ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

if [ -z "$SOURCE" ]; then
  SOURCE=$WORK/langgraphjs
  git clone --quiet --filter=blob:none --no-checkout https://github.com/langchain-ai/langgraphjs "$SOURCE"
fi
if ! COMMIT=$(git -C "$SOURCE" rev-parse --verify --quiet "$REF^{commit}"); then
  echo "$SOURCE has no commit $REF; fetch it first: git -C $SOURCE fetch origin $REF" >&2
  exit 2
fi
if [ "$COMMIT" != "$PINNED_COMMIT" ]; then
  if [ "$ANY_COMMIT" != 1 ]; then
    echo "refusing: $REF is langgraphjs $COMMIT, but the expected failures (test/parity/README.md) were checked" >&2
    echo "against the pinned $PINNED_COMMIT. Run without REF, or pass --any-commit (ANY_COMMIT=1) to run anyway." >&2
    exit 2
  fi
  echo "WARNING: the tests of langgraphjs $COMMIT, not of the pinned $PINNED_COMMIT: the expected failures" >&2
  echo "WARNING: were checked against the pinned commit; a difference may come from their commit, not this server." >&2
fi
HEAD_COMMIT=$(git -C "$SOURCE" rev-parse --verify --quiet HEAD || true)
if [ -n "$HEAD_COMMIT" ] && [ "$HEAD_COMMIT" != "$COMMIT" ]; then
  echo "note: the clone's HEAD is $HEAD_COMMIT; the tests are taken from $COMMIT (its work tree is not used)"
fi
echo "tests of langgraphjs $COMMIT"

# Their tests, their graphs, and the one source file the auth suite imports (isAuthMatching).
git -C "$SOURCE" archive "$COMMIT" libs/langgraph-api/tests libs/langgraph-api/src/auth/index.mts libs/langgraph-api/vitest.config.js | tar -x -C "$WORK"
LIB=$WORK/libs/langgraph-api
# Graphs and tests resolve packages from this repository's node_modules (vitest, the SDK, LangGraph).
ln -s "$REPO/node_modules" "$WORK/node_modules"
# Imported by the suites but unused against a running server: postgres (only without IS_MEMORY),
# wait-port (only when the suite starts its own server, with CI set).
mkdir -p "$LIB/node_modules/postgres" "$LIB/node_modules/wait-port"
echo '{"name":"postgres","type":"module","main":"index.js"}' > "$LIB/node_modules/postgres/package.json"
echo 'export default () => { throw new Error("postgres is not used against this server"); };' > "$LIB/node_modules/postgres/index.js"
echo '{"name":"wait-port","type":"module","main":"index.js"}' > "$LIB/node_modules/wait-port/package.json"
echo 'export default async () => ({ open: true });' > "$LIB/node_modules/wait-port/index.js"
# The suites hard-code their server's address: read it from API_URL instead.
sed -i -E 's#^const API_URL = "http://localhost:[0-9]+";#const API_URL = process.env.API_URL!;#' "$LIB/tests/api.test.mts" "$LIB/tests/auth.test.mts"

(cd "$REPO" && npm run build --silent)

# Starts this server on the suite's langgraph.json (development mode, as `langgraph dev`).
start_server() { # config port
  local log=$WORK/server-$2.log
  (cd "$LIB/tests/graphs" && exec env HOST=127.0.0.1 PORT="$2" DATA_DIR="$WORK/data-$2" LANGGRAPH_JSON="$LIB/tests/graphs/$1" \
    LANGGRAPH_DEV=true LOG_LEVEL=warn node --enable-source-maps "$REPO/dist/main.js" >"$log" 2>&1) &
  PIDS+=($!)
  for _ in $(seq 1 300); do
    if grep -q "listening on" "$log"; then return 0; fi
    if ! kill -0 "${PIDS[-1]}" 2>/dev/null; then cat "$log"; return 1; fi
    sleep 0.1
  done
  echo "the server on port $2 did not start"; cat "$log"; return 1
}

RESULTS=$WORK/results
mkdir -p "$RESULTS"
for suite in $SUITES; do
  case $suite in
    api) config=langgraph.json port=$API_PORT ;;
    auth) config=langgraph.auth.json port=$AUTH_PORT ;;
  esac
  start_server "$config" "$port"
  echo "== $suite.test.mts against http://localhost:$port"
  code=0
  (cd "$LIB" && API_URL=http://localhost:$port "$REPO/node_modules/.bin/vitest" run "tests/$suite.test.mts" \
    --reporter=default --reporter=json --outputFile.json="$RESULTS/$suite.json") || code=$?
  echo "$code" > "$RESULTS/$suite.exit"
done
status=0
compare "$RESULTS" || status=$?
exit $status
