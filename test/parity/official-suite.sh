#!/usr/bin/env bash
# Runs the official LangGraph.js server's own API and auth test suites (langchain-ai/langgraphjs,
# libs/langgraph-api/tests/{api,auth}.test.mts) against THIS server. Their files are copied from a
# langgraphjs checkout into a temporary folder at run time; none of them is kept in this repository.
# See test/parity/README.md for what is expected to fail and why.
#
#   test/parity/official-suite.sh [LANGGRAPHJS] [REF]
#
#   LANGGRAPHJS  a clone of https://github.com/langchain-ai/langgraphjs (work tree or git dir);
#                without it the repository is cloned into the temporary folder (needs network)
#   REF          the commit to take the tests from (default HEAD)
#   env SUITES   which suites (default "api auth"); API_PORT / AUTH_PORT (default 2024 / 2025, the
#                ports the suites were written for; their generative-UI test expects 2024)
#   env KEEP=1   keeps the temporary folder (server logs, data) for a look afterwards
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
SOURCE=${1:-}
REF=${2:-HEAD}
SUITES=${SUITES:-api auth}
API_PORT=${API_PORT:-2024}
AUTH_PORT=${AUTH_PORT:-2025}
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
echo "tests of langgraphjs $(git -C "$SOURCE" rev-parse "$REF")"

# Their tests, their graphs, and the one source file the auth suite imports (isAuthMatching).
git -C "$SOURCE" archive "$REF" libs/langgraph-api/tests libs/langgraph-api/src/auth/index.mts libs/langgraph-api/vitest.config.js | tar -x -C "$WORK"
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

status=0
for suite in $SUITES; do
  case $suite in
    api) config=langgraph.json port=$API_PORT ;;
    auth) config=langgraph.auth.json port=$AUTH_PORT ;;
    *) echo "unknown suite $suite"; exit 2 ;;
  esac
  start_server "$config" "$port"
  echo "== $suite.test.mts against http://localhost:$port"
  (cd "$LIB" && API_URL=http://localhost:$port "$REPO/node_modules/.bin/vitest" run "tests/$suite.test.mts") || status=1
done
exit $status
