#!/usr/bin/env bash
# Runs every check and test: formatting, lints (native and wasm32), the
# extension build, unit tests (including the extension's core), in-process
# relay tests, and end-to-end tests with real Chromium, the real extension
# and real Playwright/Puppeteer clients.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh

step() { printf '==> %s\n' "$*"; }
step "cargo fmt --check"
cargo fmt --all -- --check
step "cargo clippy (warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings
step "clippy on the extension's WASM glue (wasm32)"
cargo clippy -p extension-wasm --target wasm32-unknown-unknown --locked -- -D warnings
step "build the extension (Rust → WASM → extension/pkg)"
./scripts/build-extension.sh
step "cargo test (unit, in-process, real Chromium, real clients)"
cargo test --workspace --locked
