#!/usr/bin/env bash
# Runs the property-based fuzz tests (tests/tests/fuzz.rs) long, in release
# mode: every parser that reads outside input (extension protocol and its
# fast path, CDP commands, the HTTP guard, control API requests, the CDP
# client's frames, config.toml, HTTP responses) against arbitrary, mutated
# and structured inputs. CI runs the same tests short (proptest's default
# of 256 cases, a few seconds) as part of `cargo test`.
#
# Cases: PROPTEST_CASES per target (default here 200000). Targets whose
# every case costs a loopback socket round trip or parses tens of kilobytes
# run a share of it (1/2, 1/4, 1/16); each prints its own count.
# Time: the release build (a few minutes the first time), then about 2 to 3
# minutes of fuzzing at 200000 on 2 cores; about 15 s at 20000.
#   Shorter:  PROPTEST_CASES=20000 ./scripts/fuzz.sh
#   Longer:   PROPTEST_CASES=2000000 ./scripts/fuzz.sh
#   One target: ./scripts/fuzz.sh the_guard    (arguments filter test names)
# A failure prints proptest's minimal failing input; nothing is written to
# the source tree.
set -euo pipefail
cd "$(dirname "$0")/.."

export PROPTEST_CASES="${PROPTEST_CASES:-200000}"
echo "==> fuzzing in release, PROPTEST_CASES=$PROPTEST_CASES per target"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
started=$SECONDS
status=0
# --nocapture: each test reports its cases and time on stderr.
cargo test --release --locked -p e2e --test fuzz -- --nocapture --test-threads=2 "$@" 2>&1 | tee "$log" || status=$?

echo
echo "==> cases and time per target"
grep '^fuzz-stats: ' "$log" | sed 's/^fuzz-stats: //' | sort |
    awk '{ sub("cases=", "", $2); sub("seconds=", "", $3); printf "  %-96s %9s cases %8.2f s\n", $1, $2, $3; cases += $2 }
         END { printf "  %-96s %9d cases\n", "total", cases }'
echo "  wall time (build included): $((SECONDS - started)) s"
exit "$status"
