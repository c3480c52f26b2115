#!/usr/bin/env bash
# A flake census (issue 42): runs the real-Chromium suites N times and says,
# per test, how many runs it had, how many failed, and the first line of each
# distinct failure. Each run has a temporary folder of its own (as
# scripts/test.sh gives the tests); a failed run's cargo test output (with
# the relay's log lines of the failing tests, and what their Node clients
# printed) and whatever the tests left in that folder are kept under
# target/flake-census/<suite>-<run>/.
#
#   ./scripts/flake-census.sh N [--load] [SUITES...]
#
# --load: beside a CPU hog that takes one core of the machine's (stopped on
# exit, Ctrl-C included). SUITES: test targets of the e2e crate (default: all
# the real-Chromium suites below). A suite that runs longer than
# FLAKE_CENSUS_SUITE_TIMEOUT seconds (default 1800) counts as failed.
# Before the first run: ./scripts/setup.sh, ./scripts/build-extension.sh.
# Every run runs the same build: the test programs and browser-relay are
# built once and copied to target/flake-census/bin/, so that editing or
# building the tree while the census runs changes nothing it tests.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  echo "usage: $0 N [--load] [SUITES...]  (suites: conformance e2e_extension e2e_clients e2e_managed e2e_dashboard e2e_wine)" >&2
  exit 2
}

[ $# -ge 1 ] || usage
runs="$1"
shift
case "$runs" in '' | *[!0-9]*) usage ;; esac
load=0
suites=()
for arg in "$@"; do
  case "$arg" in
    --load) load=1 ;;
    -*) usage ;;
    *) suites+=("$arg") ;;
  esac
done
if [ ${#suites[@]} -eq 0 ]; then
  suites=(conformance e2e_extension e2e_clients e2e_managed e2e_dashboard e2e_wine)
fi
suite_timeout="${FLAKE_CENSUS_SUITE_TIMEOUT:-1800}"

out="target/flake-census"
rm -rf "$out"
mkdir -p "$out"
results="$out/results.tsv"
: >"$results"

tests=()
for suite in "${suites[@]}"; do
  tests+=(--test "$suite")
done
echo "== building ${suites[*]}"
bin="$out/bin"
mkdir -p "$bin"
cargo build -p browser-relay --locked
cp target/debug/browser-relay "$bin/"
export BROWSER_RELAY_EXE="$PWD/$bin/browser-relay"
# cargo names each test program on a line of its own:
#   Executable tests/e2e_clients.rs (target/debug/deps/e2e_clients-917ec66a92900c61)
cargo test -p e2e --locked --no-run "${tests[@]}" 2>&1 | tee "$out/build.log"
for suite in "${suites[@]}"; do
  program="$(sed -n "s|^ *Executable tests/$suite\.rs (\(.*\))\$|\1|p" "$out/build.log")"
  [ -n "$program" ] || { echo "no test program for $suite in $out/build.log" >&2; exit 1; }
  cp "$program" "$bin/$suite"
done
# e2e_wine passes without a word when it has no exe to run: give it the
# one scripts/test.sh gives it, and make its absence a failure.
if [[ " ${suites[*]} " == *" e2e_wine "* ]]; then
  # shellcheck source=scripts/cross-env.sh
  source scripts/cross-env.sh
  echo "== building browser-relay.exe for e2e_wine"
  CARGO_INCREMENTAL=0 cargo build --target x86_64-pc-windows-gnu --target-dir "$cross_target_dir" --locked -p browser-relay
  cp "$cross_target_dir/x86_64-pc-windows-gnu/debug/browser-relay.exe" "$bin/"
  export BROWSER_RELAY_WINDOWS_EXE="$PWD/$bin/browser-relay.exe"
  export BROWSER_RELAY_REQUIRE_WINE=1
fi

hog=""
run_tmp=""
cleanup() {
  if [ -n "$hog" ]; then
    kill "$hog" 2>/dev/null || true
    wait "$hog" 2>/dev/null || true
  fi
  if [ -n "$run_tmp" ]; then
    rm -rf "$run_tmp"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if [ "$load" = 1 ]; then
  # One core, busy: a shell loop that never sleeps.
  (while :; do :; done) &
  hog=$!
  echo "== a CPU hog takes one core (pid $hog)"
fi

started=$SECONDS
for run in $(seq 1 "$runs"); do
  for suite in "${suites[@]}"; do
    run_tmp="$(mktemp -d -t browser-relay-census.XXXXXX)"
    log="$out/$suite-$run.log"
    suite_started=$SECONDS
    rc=0
    # In the package's folder, as cargo test runs a test program.
    (cd tests && TMPDIR="$run_tmp" exec timeout "$suite_timeout" "../$bin/$suite") >"$log" 2>&1 || rc=$?
    echo "== run $run/$runs $suite: exit $rc in $((SECONDS - suite_started)) s"
    # Each test's outcome; for a failure, the first line of its panic.
    awk -v suite="$suite" -v run="$run" '
      /^test .* \.\.\. / {
        name = $2
        sub(/^test /, ""); status = $NF
        if (status == "ok" || status == "FAILED") outcome[name] = status
      }
      /^---- .* stdout ----$/ { current = $2 }
      /panicked at/ && current != "" {
        if ((getline message) > 0 && !(current in why)) why[current] = message
      }
      END {
        for (name in outcome) {
          reason = (outcome[name] == "FAILED") ? why[name] : ""
          printf "%s\t%s\t%s\t%s\n", suite, name, outcome[name], reason
        }
      }' "$log" >>"$results"
    if [ "$rc" -ne 0 ]; then
      if [ "$rc" -eq 124 ]; then
        printf '%s\t%s\t%s\t%s\n' "$suite" "(the suite)" FAILED "timed out after $suite_timeout s" >>"$results"
      elif ! grep -q "FAILED" "$log"; then
        printf '%s\t%s\t%s\t%s\n' "$suite" "(the suite)" FAILED "exit $rc: $(tail -n 1 "$log")" >>"$results"
      fi
      kept="$out/$suite-$run"
      mkdir -p "$kept"
      mv "$log" "$kept/cargo-test.log"
      cp -a "$run_tmp/." "$kept/tmp/" 2>/dev/null || true
    else
      rm -f "$log"
    fi
    rm -rf "$run_tmp"
    run_tmp=""
  done
done

echo
echo "== census: $runs run(s) of ${suites[*]}$([ "$load" = 1 ] && echo ", under load"), $((SECONDS - started)) s"
printf "%-90s %5s %8s\n" "test" "runs" "failures"
# mawk has no sort: each test's row and its reasons, sorted by test.
awk -F'\t' '
  { key = $1 "::" $2; runs[key]++ }
  $3 == "FAILED" {
    failures[key]++
    if (!((key, $4) in seen)) { seen[key, $4] = 1; reasons[key] = reasons[key] "\t" $4 }
  }
  END { for (key in runs) printf "%s\t%d\t%d%s\n", key, runs[key], failures[key], reasons[key] }' "$results" |
  sort | awk -F'\t' '
    { printf "%-90s %5d %8d\n", $1, $2, $3; for (i = 4; i <= NF; i++) print "      " $i; total += $3 }
    END { printf "total failures: %d\n", total }'
if grep -q "	FAILED	" "$results"; then
  echo "failed runs kept under $out/"
  exit 1
fi
