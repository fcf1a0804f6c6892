#!/usr/bin/env bash
# THE test command (`npm test`, CI's .ci/run): works on a fresh clone of a fresh machine.
#   1. scripts/setup.sh            tools and npm packages (cached, version-checked)
#   2. cargo fmt --check, clippy -D warnings (native and wasm32), cargo doc -D warnings (doc
#      links), the TypeScript client (clients/ts: types not stale against docs/openapi.yaml,
#      tsc of it and of examples/caller), cargo test (native tests of the core on real SQLite
#      via rusqlite, and tests/it/layout.rs: module graph, layers, citations)
#   3. scripts/build.sh            the wasm Worker (release unless SA_BUILD_PROFILE=dev)
#   4. wrangler deploy --dry-run   the deployable bundle builds (no account needed); gzip size,
#                                  and the wasm's budget: gzip -9 of build/index_bg.wasm at most
#                                  800,000 bytes (SA_WASM_BUDGET)
#   5. node --test tests/e2e/      every *.test.mjs against the built Worker in workerd, serially
# Runs every step it can even after a failure, then prints one last line "N passed, N failed":
# the test counts of cargo and node; a step that fails without test results (compile error,
# build, dry run) counts as one failure. Exit status 0 only when nothing failed. Before it: the
# time of each step and of each end-to-end file.
# Logs stay in $SA_TEST_LOGS (default: a new temporary directory, printed at the end).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$SA_ROOT"
logs="${SA_TEST_LOGS:-$(mktemp -d "${TMPDIR:-/tmp}/sa-test.XXXXXX")}"
mkdir -p "$logs"
t0=$SECONDS
passed=0
failed=0
failures=() # names of the failed steps, for the summary
timings=()

fail_step() { failed=$((failed + 1)); failures+=("$1"); sa_log "FAILED: $1"; }
timed() { timings+=("$1 $(($SECONDS - $2)) s"); }
summary() {
  echo
  # Each end-to-end file's time (tests/e2e/file-times.mjs), the longest first.
  local times
  times="$(cat "$logs"/e2e*.times 2>/dev/null | sort -rn | sed 's|tests/e2e/||; s|\.test\.mjs||' | awk '{printf "%s%s %.0f", (NR > 1 ? ", " : ""), $2, $1}')"
  [ -z "$times" ] || sa_log "e2e files (s): $times"
  sa_log "steps: $(IFS=','; echo "${timings[*]}" | sed 's/,/, /g'); total $((SECONDS - t0)) s; logs in $logs"
  [ ${#failures[@]} -eq 0 ] || sa_log "failed: ${failures[*]}"
  echo "$passed passed, $failed failed"
}

# 1. Without the tools nothing else can run: stop here.
sa_log "== 1/5 set-up"
s=$SECONDS
if ! bash scripts/setup.sh 2>&1 | tee "$logs/setup.log"; then
  fail_step "setup"
  timed setup "$s"
  summary
  exit 1
fi
timed setup "$s"

# 2. Format and lints (each a failure of its own), then the native tests. A compile error
# leaves no "test result:" lines: count it as one failure.
sa_log "== 2/5 cargo fmt --check, clippy (native and wasm32), cargo doc, clients/ts types and tsc, native tests: cargo test"
s=$SECONDS
if ! cargo fmt --check >"$logs/fmt.log" 2>&1; then
  head -n 40 "$logs/fmt.log" >&2
  fail_step "cargo fmt --check (run cargo fmt; see $logs/fmt.log)"
fi
if ! cargo clippy --all-targets --color never -- -D warnings >"$logs/clippy.log" 2>&1; then
  grep -A8 -E "^(warning|error)" "$logs/clippy.log" | head -n 60 >&2
  fail_step "cargo clippy --all-targets (see $logs/clippy.log)"
fi
if ! cargo clippy --target wasm32-unknown-unknown --color never -- -D warnings >"$logs/clippy-wasm.log" 2>&1; then
  grep -A8 -E "^(warning|error)" "$logs/clippy-wasm.log" | head -n 60 >&2
  fail_step "cargo clippy --target wasm32-unknown-unknown (see $logs/clippy-wasm.log)"
fi
if ! RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --color never >"$logs/doc.log" 2>&1; then
  grep -A8 -E "^(warning|error)" "$logs/doc.log" | head -n 60 >&2
  fail_step "cargo doc (broken doc links; see $logs/doc.log)"
fi
# The TypeScript client: src/openapi.ts is what docs/openapi.yaml generates now, and the client
# (with its type tests) and examples/caller (against the Workers types `wrangler types` writes
# into worker-configuration.d.ts, git-ignored) typecheck.
if ! node clients/ts/scripts/check-types.mjs >"$logs/client-types.log" 2>&1; then
  cat "$logs/client-types.log" >&2
  fail_step "clients/ts types are stale (run npm run generate --prefix clients/ts; see $logs/client-types.log)"
fi
if ! tsc -p clients/ts/tsconfig.test.json >"$logs/tsc-client.log" 2>&1; then
  head -n 40 "$logs/tsc-client.log" >&2
  fail_step "tsc -p clients/ts (see $logs/tsc-client.log)"
fi
if ! (cd examples/caller && wrangler types >"$logs/tsc-caller.log" 2>&1) ||
  ! tsc -p examples/caller >>"$logs/tsc-caller.log" 2>&1; then
  tail -n 40 "$logs/tsc-caller.log" >&2
  fail_step "tsc -p examples/caller (see $logs/tsc-caller.log)"
fi
set +e
cargo test --color never 2>&1 | tee "$logs/cargo.log"
cargo_rc=${PIPESTATUS[0]}
set -e
cargo_pass=0
cargo_fail=0
while read -r p f; do
  cargo_pass=$((cargo_pass + p))
  cargo_fail=$((cargo_fail + f))
done < <(sed -n 's/^test result: [A-Za-z]*\. \([0-9]*\) passed; \([0-9]*\) failed.*/\1 \2/p' "$logs/cargo.log")
passed=$((passed + cargo_pass))
failed=$((failed + cargo_fail))
[ "$cargo_fail" -eq 0 ] || failures+=("cargo test ($cargo_fail)")
if [ "$cargo_rc" -ne 0 ] && [ "$cargo_fail" -eq 0 ]; then fail_step "cargo test (exit $cargo_rc, see $logs/cargo.log)"; fi
sa_log "cargo test: $cargo_pass passed, $cargo_fail failed"
timed "cargo-test" "$s"

# 3. The wasm build, as wrangler's [build] step runs it.
sa_log "== 3/5 wasm build: scripts/build.sh (${SA_BUILD_PROFILE:-release})"
s=$SECONDS
built=1
if ! bash scripts/build.sh 2>&1 | tee "$logs/build.log"; then
  built=0
  fail_step "wasm build (see $logs/build.log)"
fi
timed build "$s"

# 4. The bundle `wrangler deploy` would upload. The build just ran: skip the [build] rerun.
sa_log "== 4/5 wrangler deploy --dry-run"
s=$SECONDS
if [ "$built" = 1 ]; then
  rm -rf "$logs/bundle"
  if SA_SKIP_BUILD_IF_FRESH=1 wrangler deploy --dry-run --outdir "$logs/bundle" >"$logs/deploy.log" 2>&1 &&
    ls "$logs/bundle"/*.wasm >/dev/null 2>&1; then
    sa_log "bundle: wasm $(cat "$logs/bundle"/*.wasm | wc -c) bytes, $(cat "$logs/bundle"/*.wasm | gzip -9 | wc -c) gzipped;" \
      "js $(cat "$logs/bundle"/*.js | wc -c) bytes, $(cat "$logs/bundle"/*.js | gzip -9 | wc -c) gzipped"
    sa_log "bundle (wrangler): $(grep -o 'Total Upload: .*' "$logs/deploy.log" || echo '?')"
    # The wasm's size is a product metric: a budget the build may not pass (gzip -9 of the
    # release build/index_bg.wasm; SA_WASM_BUDGET to move it, e.g. for a dev build).
    wasm_gz=$(gzip -9 -c build/index_bg.wasm | wc -c)
    budget="${SA_WASM_BUDGET:-800000}"
    if [ "$wasm_gz" -gt "$budget" ]; then
      fail_step "wasm size: gzip -9 of build/index_bg.wasm is $wasm_gz bytes, over the budget of $budget"
    else
      sa_log "wasm size: $wasm_gz bytes gzip -9, within the budget of $budget"
    fi
  else
    cat "$logs/deploy.log" >&2
    ls -la "$logs/bundle" >&2 2>/dev/null || true
    fail_step "wrangler deploy --dry-run (see $logs/deploy.log)"
  fi
else
  fail_step "wrangler deploy --dry-run (skipped: no build)"
fi
timed "dry-run" "$s"

# 5. End to end in workerd. One file at a time (each starts its own runtimes and ports). Human
# output on the terminal, TAP to a file for the counts ("cancelled" = hook failures, timeouts),
# and each file's time (tests/e2e/file-times.mjs) for the summary.
# node:test has no default timeout: a hung test would hang CI, so each test (and each file, which
# node runs as a test too) gets SA_E2E_TIMEOUT_MS (default 120 s) unless it sets its own
# { timeout }. A file with a test that sets more than 120 s (the crash, fuzz, hostile and
# concurrency tests among them: restarts, kills, thousands of requests) can itself take longer on
# a loaded 2-core machine: those files run apart, with SA_E2E_LONG_TIMEOUT_MS (default 15 min)
# for the file (and for their tests that set none).
sa_log "== 5/5 end-to-end tests: node --test tests/e2e/"
s=$SECONDS
# run_e2e NAME TIMEOUT FILE…: one node --test run; adds its counts to passed/failed.
run_e2e() {
  local name=$1 timeout=$2
  shift 2
  set +e
  node --test --test-concurrency=1 --test-timeout="$timeout" \
    --test-reporter=spec --test-reporter-destination=stdout \
    --test-reporter=tap --test-reporter-destination="$logs/$name.tap" \
    --test-reporter=./tests/e2e/file-times.mjs --test-reporter-destination="$logs/$name.times" \
    "$@" 2>&1 | tee "$logs/$name.log"
  local rc=${PIPESTATUS[0]}
  set -e
  count() { sed -n "s/^# $1 \([0-9]*\)\$/\1/p" "$logs/$name.tap" | tail -1; }
  local pass fail cancelled
  pass=$(count pass)
  fail=$(count fail)
  cancelled=$(count cancelled)
  fail=$((${fail:-0} + ${cancelled:-0}))
  e2e_pass=$((e2e_pass + ${pass:-0}))
  e2e_fail=$((e2e_fail + fail))
  if [ "$rc" -ne 0 ] && [ "$fail" -eq 0 ]; then fail_step "node --test $name (exit $rc, see $logs/$name.log)"; fi
}
if [ "$built" = 1 ]; then
  e2e_pass=0
  e2e_fail=0
  # A `timeout:` of 121,000 ms or more (written with or without `_`) marks a long file.
  long_test='timeout: *(1(2[1-9]|[3-9][0-9])|[2-9][0-9][0-9])_?[0-9]{3}\b|timeout: *[0-9]_?[0-9]{3}_?[0-9]{3}\b'
  mapfile -t long_files < <(grep -lE "$long_test" tests/e2e/*.test.mjs)
  mapfile -t other_files < <(grep -LE "$long_test" tests/e2e/*.test.mjs)
  run_e2e e2e "${SA_E2E_TIMEOUT_MS:-120000}" "${other_files[@]}"
  run_e2e e2e-long "${SA_E2E_LONG_TIMEOUT_MS:-900000}" "${long_files[@]}"
  passed=$((passed + e2e_pass))
  failed=$((failed + e2e_fail))
  [ "$e2e_fail" -eq 0 ] || failures+=("e2e ($e2e_fail)")
  sa_log "e2e: $e2e_pass passed, $e2e_fail failed"
else
  fail_step "e2e (skipped: no build)"
fi
timed e2e "$s"

summary
[ "$failed" -eq 0 ]
