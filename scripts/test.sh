#!/usr/bin/env bash
# Runs every check and test: formatting, lints, the wasm32 build of the
# protocol crate, unit tests, in-process relay tests, and end-to-end tests
# with real Chromium and real Playwright/Puppeteer clients.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh

step() { printf '==> %s\n' "$*"; }
step "cargo fmt --check"
cargo fmt --all -- --check
step "cargo clippy (warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings
step "shared-protocol builds for wasm32"
cargo build -p shared-protocol --target wasm32-unknown-unknown --locked
step "cargo test (unit, in-process, real Chromium, real clients)"
cargo test --workspace --locked
