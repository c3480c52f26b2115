#!/usr/bin/env bash
# Builds the extension's service worker (Rust → WASM) into extension/pkg/.
# Load the extension/ folder unpacked in Chrome afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
step() { printf '==> %s\n' "$*"; }

# wasm-bindgen-cli must match the wasm-bindgen crate exactly (pinned in
# extension-wasm/Cargo.toml); install it only when missing or different.
want=$(awk '/^name = "wasm-bindgen"$/{getline; gsub(/version = |"/, ""); print; exit}' Cargo.lock)
have=$(wasm-bindgen --version 2>/dev/null | awk '{print $2}' || true)
if [ "$have" != "$want" ]; then
  step "installing wasm-bindgen-cli $want (a few minutes, once)"
  cargo install wasm-bindgen-cli --version "$want"
fi

step "building extension-wasm for wasm32"
cargo build --release --locked -p extension-wasm --target wasm32-unknown-unknown
step "generating extension/pkg"
# Cargo honours CARGO_TARGET_DIR (worktrees share one); so must we.
wasm-bindgen --target web --no-typescript --out-dir extension/pkg \
  "${CARGO_TARGET_DIR:-target}/wasm32-unknown-unknown/release/extension_wasm.wasm"
ls -l extension/pkg/extension_wasm_bg.wasm | awk '{printf "==> extension/pkg/extension_wasm_bg.wasm: %d KB\n", $5/1024}'
