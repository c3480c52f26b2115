#!/usr/bin/env bash
# Runs every check and test: formatting, lints (native, wasm32, Windows and
# both macOS targets), the extension build, unit tests (including the
# extension's core), in-process relay tests, the Windows build's unit and
# in-process tests under Wine, and end-to-end tests with real Chromium, the
# real extension and real Playwright/Puppeteer clients (one of them against
# the Windows browser-relay.exe under Wine).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/cross-env.sh
source scripts/cross-env.sh

# A clean run writes about 10 GB: target/ (about 5 GB) and the cross builds'
# folder (about 4 GB). Short of that, a build fails minutes in with "No space
# left on device"; say it first.
free_gb() { df -P -k "$1" 2>/dev/null | awk 'NR == 2 { print int($4 / 1048576) }'; }
mkdir -p target "$cross_target_dir"
for folder in target "$cross_target_dir"; do
  free="$(free_gb "$folder")"
  if [ -n "$free" ] && [ "$free" -lt 12 ]; then
    echo "warning: $free GB free where $folder is; a clean run needs about 10 GB (target/ and $cross_target_dir, set by BROWSER_RELAY_CROSS_TARGET)" >&2
  fi
done

./scripts/setup.sh
./scripts/cross-setup.sh

# Each step says how long the run has taken so far (set-up included).
step() { printf '==> [%dm%02ds] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*"; }
step "cargo fmt --check"
cargo fmt --all -- --check
step "the GitHub workflows: actionlint and zizmor (scripts/lint-workflows.sh)"
./scripts/lint-workflows.sh
step "cargo clippy (warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings
step "clippy on the extension's WASM glue (wasm32)"
cargo clippy -p extension-wasm --target wasm32-unknown-unknown --locked -- -D warnings
# The crates that make the binary (the e2e crate is Linux's test bench).
product=(-p shared-protocol -p state-dir -p cdp-client -p grants -p relay-engine -p settings -p activity -p managed-driver -p control-engine -p browser-relay)
# Cross builds: their own target folder (kept between runs), and no
# incremental state (nobody edits against them; it would double the folder).
cross() { CARGO_INCREMENTAL=0 cargo "$1" --target-dir "$cross_target_dir" --locked "${@:2}"; }
step "clippy for Windows (x86_64-pc-windows-gnu; warnings are errors)"
cross clippy --target x86_64-pc-windows-gnu "${product[@]}" --lib --bins --tests -- -D warnings
for target in aarch64-apple-darwin x86_64-apple-darwin; do
  step "clippy for macOS ($target, through zig; warnings are errors)"
  CARGO_INCREMENTAL=0 cargo-zigbuild clippy --target "$target" --target-dir "$cross_target_dir" --locked "${product[@]}" --lib --bins --tests -- -D warnings
done
step "Windows: unit tests of every product crate, under Wine"
cross test --target x86_64-pc-windows-gnu "${product[@]}" --lib --bins
step "Windows: the managed driver's launch, pipe handles, readiness and stop (Job Object) with a stand-in browser, under Wine"
cross test --target x86_64-pc-windows-gnu -p managed-driver --test stand_in_browser
step "Windows: the relay's in-process tests (a scripted extension and clients), under Wine"
cross test --target x86_64-pc-windows-gnu -p e2e --test relay_reliability
step "Windows: browser-relay.exe for the Wine end-to-end test"
cross build --target x86_64-pc-windows-gnu -p browser-relay
export BROWSER_RELAY_WINDOWS_EXE="$cross_target_dir/x86_64-pc-windows-gnu/debug/browser-relay.exe"
export BROWSER_RELAY_REQUIRE_WINE=1
step "build the extension (Rust → WASM → extension/pkg)"
./scripts/build-extension.sh
step "build the tests"
cargo test --workspace --locked --no-run
step "cargo test (unit, in-process, real Chromium, real clients)"
# The tests run with a temporary folder of their own, and leave it empty:
# whatever a test (its browsers, Node clients, relays) leaves there, it
# would leave in a user's /tmp, run after run.
test_tmp="$(mktemp -d -t browser-relay-tests.XXXXXX)"
trap 'rm -rf "$test_tmp"' EXIT
TMPDIR="$test_tmp" cargo test --workspace --locked
left="$(find "$test_tmp" -mindepth 1 -maxdepth 1)"
if [ -n "$left" ]; then
  echo "the tests left these in their temporary folder ($test_tmp):" >&2
  find "$test_tmp" -mindepth 1 -maxdepth 3 >&2
  exit 1
fi
step "every check passed"
